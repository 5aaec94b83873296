"""Configs: finding them (machine-format.md §1.1), reading them, and combining the user's and
the project's machines (§1.2) into one `Loaded` set.

`tomllib` (stdlib) reads configs; `tomlkit` is only for editing them (`smllm new --write`).
"""

from __future__ import annotations

import os

from ...files import MISSING, read_regular
from ...recordclass import Record
from ..findings import Finding, Path_
from ..model import IdlePrompt, Loaded, Machine, StoreSpec

__all__ = [
    "ConfigFile",
    "find_configs",
    "load_configs",
    "read_config",
    "shown_path",
    "user_config_path",
]

HARNESS_PARTS: dict[str, tuple[str, ...]] = {
    "claude": ("instructions", "mcp", "hooks", "permissions", "statusline"),
    "codex": ("instructions", "mcp", "hooks"),
    "copilot": ("instructions", "mcp", "hooks"),
    "opencode": ("instructions", "mcp", "plugin"),
    "agents": ("instructions",),
}


class ConfigFile(Record):
    path: str
    machine_files: tuple[tuple[str, str], ...]  # (absolute path, as written)
    idle: IdlePrompt | None
    store: StoreSpec
    without: dict[str, tuple[str, ...]]
    findings: tuple[Finding, ...]
    listed: tuple[str, ...] = ()  # every `[machines] files` path, found or not (cache key)

    @property
    def ok(self) -> bool:
        return not any(f.level == "error" for f in self.findings)


def shown_path(path: str, cwd: str | None = None) -> str:
    """A path relative to the current folder when inside it, else absolute; `cwd=""` keeps
    every path absolute (what the cache stores)."""
    if cwd == "":
        return path
    base = cwd or os.getcwd()
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def user_config_path(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    env = env if env is not None else os.environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "smllm", "config.toml")


def find_configs(cwd: str, explicit: str | None) -> tuple[str, ...]:
    """The configs to read, user first (absolute paths). `explicit` must exist (caller checks)."""
    if explicit:
        return (os.path.abspath(os.path.join(cwd, explicit)),)
    found: list[str] = []
    user = user_config_path()
    if os.path.isfile(user):
        found.append(os.path.realpath(user))
    here = os.path.abspath(cwd)
    while True:
        candidate = os.path.join(here, ".smllm", "config.toml")
        if os.path.isfile(candidate):
            real = os.path.realpath(candidate)
            if real in found:
                found.remove(real)
            found.append(real)
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return tuple(found)


_BOM = b"\xef\xbb\xbf"
_TOML_POS = r"\(at line (\d+), column (\d+)\)$"  # tomllib's position, at a message's end


def _bad(
    rule: str,
    shown: str,
    message: str,
    path: tuple[str | int, ...] | None = None,
    line: int | None = None,
    col: int | None = None,
    hint: str | None = None,
) -> Finding:
    return Finding.make(rule, shown, message, path=path, line=line, col=col, hint=hint)


def read_config(path: str, cwd: str | None = None) -> ConfigFile:
    """Read one config.toml; an unreadable or malformed one carries findings (CFG-1 … CFG-12)."""
    import tomllib

    shown = shown_path(path, cwd)
    folder = os.path.dirname(path)
    default_store = StoreSpec("dir", os.path.join(folder, "state"), "default")
    findings: list[Finding] = []

    def unread(message: str, line: int | None = None, col: int | None = None) -> ConfigFile:
        """The config that couldn't be read at all: one CFG-1, no machines."""
        finding = _bad("CFG-1", shown, message, line=line, col=col)
        return ConfigFile(path, (), None, default_store, {}, (finding,))

    raw, problem = read_regular(path)  # never opens a FIFO or a device
    if raw is None:
        return unread(f"can't read the config: {'not found' if problem == MISSING else problem}")
    bom = len(_BOM) if raw.startswith(_BOM) else 0
    # a TOML file is a UTF-8 document, which may start with a byte order mark (toml-lang
    # #437); tomllib refuses one, so it goes, and columns count from the character after it
    raw = raw[bom:]
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        at = (before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1)
        return unread(f"not valid TOML: not UTF-8 (byte {bom + exc.start})", *at)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        import re

        m = re.search(_TOML_POS, msg)
        reason = re.sub(_TOML_POS, "", msg).strip()
        where: tuple[int | None, int | None] = (
            (int(m.group(1)), int(m.group(2))) if m else (None, None)
        )
        if msg.endswith("(at end of document)"):
            where = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
            reason = reason.replace("(at end of document)", "").strip()
        return unread(f"not valid TOML: {reason}", *where)

    def bad(rule: str, message: str, at: Path_ | None = None, at_key: bool = False) -> Finding:
        """A finding at the line and column of its key (`at_key`) or value in the source."""
        return config_finding(shown, text, rule, message, at, at_key)

    allowed = {
        "machines": ("files",),
        "idle": ("on-enter",),
        "state": ("dir", "url", "url-env", "namespace"),
        "harness": (),
    }
    for table, value in data.items():
        if table not in allowed:
            findings.append(
                bad(
                    "CFG-2",
                    f"unknown key {table} (allowed: " + ", ".join(allowed) + ")",
                    (table,),
                    at_key=True,
                )
            )
            continue
        if not isinstance(value, dict):
            findings.append(bad("CFG-2", f"{table} must be a table", (table,)))
            continue
        if table == "harness":
            continue
        for key in value:
            if key not in allowed[table]:
                findings.append(
                    bad(
                        "CFG-2",
                        f"unknown key {table}.{key} (allowed: " + ", ".join(allowed[table]) + ")",
                        (table, key),
                        at_key=True,
                    )
                )

    files: list[tuple[str, str]] = []
    raw_files = (
        (data.get("machines") or {}).get("files", [])
        if isinstance(data.get("machines"), dict)
        else []
    )
    if not isinstance(raw_files, list) or not all(isinstance(x, str) for x in raw_files):
        findings.append(
            bad("CFG-2", "machines.files must be a list of paths", ("machines", "files"))
        )
        raw_files = []
    seen: set[str] = set()
    listed: list[str] = []
    for index, entry in enumerate(raw_files):
        full = os.path.normpath(os.path.join(folder, entry))
        listed.append(full)
        if full in seen:
            findings.append(
                bad(
                    "CFG-12",
                    f"{entry} is listed twice; it is loaded once",
                    ("machines", "files", index),
                )
            )
            continue
        seen.add(full)
        if not os.path.isfile(full):
            finding = bad("CFG-3", f"no machine file {entry}", ("machines", "files", index))
            if os.path.exists(full):  # a folder, FIFO, socket or device: never opened
                finding = finding._replace(hint=_NOT_REGULAR_HINT)
            findings.append(finding)
            continue
        files.append((full, entry))

    idle = None
    idle_t = data.get("idle")
    if isinstance(idle_t, dict) and "on-enter" in idle_t:
        value = idle_t["on-enter"]
        if (
            not isinstance(value, dict)
            or set(value) - {"text", "file"}
            or len(value) != 1
            or not isinstance(next(iter(value.values())), str)
        ):
            findings.append(
                bad(
                    "CFG-9",
                    "on-enter needs exactly one of text or file",
                    ("idle", "on-enter"),
                )
            )
        elif "text" in value:
            idle = IdlePrompt(value["text"], None, "")
        else:
            idle = IdlePrompt(
                None, os.path.normpath(os.path.join(folder, value["file"])), value["file"]
            )

    store = default_store
    state_t = data.get("state")
    if isinstance(state_t, dict):
        given = [k for k in ("dir", "url", "url-env") if k in state_t]
        for key in ("dir", "url", "url-env", "namespace"):
            if key in state_t and not isinstance(state_t[key], str):
                findings.append(bad("CFG-2", f"state.{key} must be a string", ("state", key)))
                given = []
        namespace = state_t.get("namespace", "default")
        if len(given) > 1:
            findings.append(
                bad(
                    "CFG-10",
                    "give only one of state.dir, state.url and state.url-env",
                    ("state",),
                )
            )
        elif "namespace" in state_t and not (set(given) & {"url", "url-env"}):
            findings.append(
                bad(
                    "CFG-10",
                    "state.namespace goes with url or url-env",
                    ("state", "namespace"),
                )
            )
        elif given == ["dir"]:
            store = StoreSpec(
                "dir", os.path.normpath(os.path.join(folder, state_t["dir"])), "default"
            )
        elif given == ["url"]:
            if not str(state_t["url"]).startswith(("postgresql://", "postgres://")):
                findings.append(
                    bad("CFG-10", "state.url must be a postgresql:// URL", ("state", "url"))
                )
            store = StoreSpec("url", state_t["url"], str(namespace))
        elif given == ["url-env"]:
            if not os.environ.get(state_t["url-env"]):
                findings.append(
                    bad(
                        "CFG-10",
                        f"state.url-env names {state_t['url-env']}, which is unset or empty",
                        ("state", "url-env"),
                    )
                )
            store = StoreSpec("url-env", state_t["url-env"], str(namespace))

    without: dict[str, tuple[str, ...]] = {}
    harness_t = data.get("harness")
    if isinstance(harness_t, dict):
        for name, table in harness_t.items():
            if name not in HARNESS_PARTS:
                findings.append(
                    bad(
                        "CFG-11",
                        f"no harness {name} ({', '.join(HARNESS_PARTS)})",
                        ("harness", name),
                        at_key=True,
                    )
                )
                continue
            if not isinstance(table, dict):
                findings.append(bad("CFG-2", f"harness.{name} must be a table", ("harness", name)))
                continue
            parts = table.get("without", [])
            if not isinstance(parts, list):
                findings.append(
                    bad(
                        "CFG-2",
                        f"harness.{name}.without must be a list",
                        ("harness", name, "without"),
                    )
                )
                continue
            for index, part in enumerate(parts):
                if part not in HARNESS_PARTS[name]:
                    findings.append(
                        bad(
                            "CFG-11",
                            f"{name} has no part {part} (parts: "
                            + ", ".join(HARNESS_PARTS[name])
                            + ")",
                            ("harness", name, "without", index),
                        )
                    )
            without[name] = tuple(str(p) for p in parts)
    return ConfigFile(path, tuple(files), idle, store, without, tuple(findings), tuple(listed))


_NOT_REGULAR_HINT = "a machine file must be a regular file, not a folder, FIFO, socket or device"


def config_finding(
    shown: str, text: str, rule: str, message: str, at: Path_ | None, at_key: bool = False
) -> Finding:
    """A finding about the config `shown` whose source is `text`, at its node's line and
    column: the key (`at_key`, for unknown keys) or the value."""
    line = col = None
    if at:
        from ..sources.tomlpos import toml_position

        # the node, or else the nearest one above it that the source writes out
        probe = at
        while probe and line is None:
            pos = toml_position(text, probe, at_key and probe == at)
            if pos is not None:
                line, col = pos
            probe = probe[:-1]
    return Finding.make(rule, shown, message, path=at, line=line, col=col)


def load_configs(configs: tuple[str, ...], cwd: str | None = None) -> Loaded:
    """Read and combine `configs` (user first, project last) and load their machines."""
    from ..loader.load import LoadResult, load_machine_file

    machines: dict[str, Machine] = {}
    stores: dict[str, StoreSpec] = {}
    owner: dict[str, str] = {}  # machine id → the file that defined it
    owner_at: dict[str, tuple[int | None, int | None]] = {}  # … and where its id is
    findings: list[Finding] = []
    looked: list[str] = []
    withdrawn: list[str] = []
    idle: IdlePrompt | None = None

    def load(full: str) -> LoadResult:
        """A listed machine file, its findings and reads kept; the id of one with errors too."""
        result = load_machine_file(full, shown_path(full, cwd))
        findings.extend(result.findings)
        looked.extend(result.reads)
        if result.machine is None and result.top_id:
            withdrawn.append(result.top_id)
        return result

    read = [read_config(p, cwd) for p in configs if os.path.isfile(p)]
    project = read[-1] if len(read) > 1 else None
    for cfg in read:
        looked.append(cfg.path)  # load order: each config, then its machine files
        findings.extend(cfg.findings)
        is_project = cfg is project
        if not cfg.ok:
            # its machine files, found or not, are still part of the cache key: a missing one
            # (CFG-3) created later must be seen without the config being touched
            looked.extend(cfg.listed)
            # every finding at once (validation.md §1): the listed files that are there are
            # still checked, though a config with an error adds none of their machines
            for full, _entry in cfg.machine_files:
                load(full)
            # a config with an error adds no machines; a project config that isn't valid
            # TOML or has unknown keys (CFG-1, CFG-2) also withdraws the user's (CFG-7)
            if is_project and any(f.rule in ("CFG-1", "CFG-2") for f in cfg.findings):
                findings.append(
                    _bad(
                        "CFG-7",
                        shown_path(cfg.path, cwd),
                        "the project config has "
                        "errors, so no machine is loaded, the user's included",
                    )
                )
                machines.clear()
                stores.clear()
            continue
        if cfg.idle is not None:
            idle = cfg.idle
        this_config: dict[str, str] = {}
        for full, _entry in cfg.machine_files:
            looked.append(full)
            shown = shown_path(full, cwd)
            result = load(full)
            if result.machine is None:
                if is_project and result.top_id and result.top_id in machines:
                    findings.append(
                        _bad(
                            "CFG-8",
                            shown,
                            f"the user's machine {result.top_id} is "
                            f"not loaded either, because {shown} has errors",
                            hint=f"fix {shown}; smllm never falls back to the user's copy",
                        )
                    )
                    del machines[result.top_id]
                    stores.pop(result.top_id, None)
                continue
            mid = result.machine.id
            if mid in this_config:
                findings.append(
                    _bad(
                        "CFG-4",
                        shown,
                        f"machine {mid} is also defined in {shown_path(this_config[mid], cwd)}",
                        ("id",),
                        *(result.id_at or (None, None)),
                    )
                )
                continue
            this_config[mid] = full
            if mid in machines:
                if is_project:
                    findings.append(
                        _bad(
                            "CFG-6",
                            shown,
                            f"replaces the user's machine {mid} ({shown_path(owner[mid], cwd)})",
                            ("id",),
                            *(result.id_at or (None, None)),
                        )
                    )
                del machines[mid]
            machines[mid] = result.machine
            stores[mid] = cfg.store
            owner[mid] = full
            owner_at[mid] = result.id_at or (None, None)
    lowered: dict[str, str] = {}
    for mid in list(machines):
        low = mid.lower()
        if low in lowered:
            findings.append(
                _bad(
                    "CFG-5",
                    shown_path(owner[mid], cwd),
                    f"machine ids {lowered[low]} and {mid} differ only in case",
                    ("id",),
                    *owner_at[mid],
                )
            )
            # an error withdraws the machine it is found in (validation.md §1): the later one
            del machines[mid]
            stores.pop(mid, None)
            withdrawn.append(mid)
            continue
        lowered[low] = mid
    config_stores = {cfg.path: cfg.store for cfg in read}
    looked.extend(p for p in configs if not os.path.isfile(p))  # missing, for the cache key
    return Loaded(
        tuple(configs),
        machines,
        stores,
        config_stores,
        idle,
        tuple(findings),
        tuple(looked),
        tuple(withdrawn),
    )
