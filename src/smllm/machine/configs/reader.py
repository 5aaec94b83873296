"""Reading one config.toml (machine-format.md §1.1): a `ConfigReader` with one method per table,
each adding its findings (CFG-1 … CFG-12), like the machine loader's builder. An unreadable or
malformed file is still a `ConfigFile`: no machines, and the finding that says why.
"""

from __future__ import annotations

import os

from ...files import MISSING, read_regular
from ...recordclass import Record
from ..findings import Finding, Path_
from ..model import IdlePrompt, StoreSpec

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "HARNESS_PARTS",
    "ConfigFile",
    "ConfigReader",
    "config_finding",
    "read_config",
    "shown_path",
]

HARNESS_PARTS: dict[str, tuple[str, ...]] = {
    "claude": ("instructions", "mcp", "hooks", "permissions", "statusline"),
    "codex": ("instructions", "mcp", "hooks"),
    "copilot": ("instructions", "mcp", "hooks"),
    "opencode": ("instructions", "mcp", "plugin"),
    "agents": ("instructions",),
}

#: each table a config may hold, and its keys (harness: one table per harness, checked apart)
TABLES: dict[str, tuple[str, ...]] = {
    "machines": ("files",),
    "idle": ("on-enter",),
    "state": ("dir", "url", "url-env", "namespace"),
    "harness": (),
}

_BOM = b"\xef\xbb\xbf"
_TOML_POS = r"\(at line (\d+), column (\d+)\)$"  # tomllib's position, at a message's end
_NOT_REGULAR_HINT = "a machine file must be a regular file, not a folder, FIFO, socket or device"


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


def read_config(path: str, cwd: str | None = None) -> ConfigFile:
    """Read one config.toml; an unreadable or malformed one carries findings (CFG-1 … CFG-12)."""
    return ConfigReader(path, cwd).read()


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


class ConfigReader:
    """One config file read: `read()` parses it, then each table's method reads its part and
    adds its findings."""

    def __init__(self, path: str, cwd: str | None = None) -> None:
        self.path = path
        self.shown = shown_path(path, cwd)
        self.folder = os.path.dirname(path)
        self.default_store = StoreSpec("dir", os.path.join(self.folder, "state"), "default")
        self.findings: list[Finding] = []
        self.text = ""

    def read(self) -> ConfigFile:
        data = self.parse()
        if isinstance(data, ConfigFile):
            return data
        self.tables(data)
        files, listed = self.machines(data)
        idle = self.idle(data)
        store = self.state(data)
        without = self.harness(data)
        findings = tuple(self.findings)
        return ConfigFile(self.path, files, idle, store, without, findings, listed)

    # -- the file --------------------------------------------------------------------------------

    def unread(self, message: str, line: int | None = None, col: int | None = None) -> ConfigFile:
        """The config that couldn't be read at all: one CFG-1, no machines."""
        finding = Finding.make("CFG-1", self.shown, message, line=line, col=col)
        return ConfigFile(self.path, (), None, self.default_store, {}, (finding,))

    def parse(self) -> dict[str, Any] | ConfigFile:
        """The file's TOML, or the config that couldn't be read (CFG-1)."""
        import tomllib

        raw, problem = read_regular(self.path)  # never opens a FIFO or a device
        if raw is None:
            missing = "not found" if problem == MISSING else problem
            return self.unread(f"can't read the config: {missing}")
        bom = len(_BOM) if raw.startswith(_BOM) else 0
        # a TOML file is a UTF-8 document, which may start with a byte order mark (toml-lang
        # #437); tomllib refuses one, so it goes, and columns count from the character after it
        raw = raw[bom:]
        try:
            self.text = raw.decode("utf-8")
            return tomllib.loads(self.text)
        except UnicodeDecodeError as exc:
            before = raw[: exc.start].decode("utf-8", "replace")
            at = (before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1)
            return self.unread(f"not valid TOML: not UTF-8 (byte {bom + exc.start})", *at)
        except tomllib.TOMLDecodeError as exc:
            return self._toml_error(str(exc))

    def _toml_error(self, msg: str) -> ConfigFile:
        import re

        m = re.search(_TOML_POS, msg)
        reason = re.sub(_TOML_POS, "", msg).strip()
        where: tuple[int | None, int | None] = (
            (int(m.group(1)), int(m.group(2))) if m else (None, None)
        )
        if msg.endswith("(at end of document)"):
            text = self.text
            where = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
            reason = reason.replace("(at end of document)", "").strip()
        return self.unread(f"not valid TOML: {reason}", *where)

    def bad(self, rule: str, message: str, at: Path_ | None = None, at_key: bool = False) -> None:
        """Add a finding at the line and column of its key (`at_key`) or value."""
        self.findings.append(config_finding(self.shown, self.text, rule, message, at, at_key))

    # -- the tables ------------------------------------------------------------------------------

    def tables(self, data: dict[str, Any]) -> None:
        """CFG-2: unknown tables and keys, and tables that aren't tables."""
        for table, value in data.items():
            if table not in TABLES:
                allowed = ", ".join(TABLES)
                self.bad("CFG-2", f"unknown key {table} (allowed: {allowed})", (table,), True)
                continue
            if not isinstance(value, dict):
                self.bad("CFG-2", f"{table} must be a table", (table,))
                continue
            if table == "harness":
                continue
            for key in value:
                if key not in TABLES[table]:
                    allowed = ", ".join(TABLES[table])
                    message = f"unknown key {table}.{key} (allowed: {allowed})"
                    self.bad("CFG-2", message, (table, key), True)

    def machines(self, data: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        """`[machines] files`: the files found (absolute, as written), and every path listed."""
        table = data.get("machines")
        raw_files = (table or {}).get("files", []) if isinstance(table, dict) else []
        if not isinstance(raw_files, list) or not all(isinstance(x, str) for x in raw_files):
            self.bad("CFG-2", "machines.files must be a list of paths", ("machines", "files"))
            raw_files = []
        files: list[tuple[str, str]] = []
        seen: set[str] = set()
        listed: list[str] = []
        for index, entry in enumerate(raw_files):
            full = os.path.normpath(os.path.join(self.folder, entry))
            listed.append(full)
            at: Path_ = ("machines", "files", index)
            if full in seen:
                self.bad("CFG-12", f"{entry} is listed twice; it is loaded once", at)
                continue
            seen.add(full)
            if not os.path.isfile(full):
                self.bad("CFG-3", f"no machine file {entry}", at)
                if os.path.exists(full):  # a folder, FIFO, socket or device: never opened
                    self.findings[-1] = self.findings[-1]._replace(hint=_NOT_REGULAR_HINT)
                continue
            files.append((full, entry))
        return tuple(files), tuple(listed)

    def idle(self, data: dict[str, Any]) -> IdlePrompt | None:
        """`[idle] on-enter`: exactly one of text or file (CFG-9)."""
        table = data.get("idle")
        if not isinstance(table, dict) or "on-enter" not in table:
            return None
        value = table["on-enter"]
        if (
            not isinstance(value, dict)
            or set(value) - {"text", "file"}
            or len(value) != 1
            or not isinstance(next(iter(value.values())), str)
        ):
            self.bad("CFG-9", "on-enter needs exactly one of text or file", ("idle", "on-enter"))
            return None
        if "text" in value:
            return IdlePrompt(value["text"], None, "")
        return IdlePrompt(
            None, os.path.normpath(os.path.join(self.folder, value["file"])), value["file"]
        )

    def state(self, data: dict[str, Any]) -> StoreSpec:
        """`[state]`: a folder, a PostgreSQL URL, or the variable that holds one (CFG-10)."""
        table = data.get("state")
        if not isinstance(table, dict):
            return self.default_store
        given = [k for k in ("dir", "url", "url-env") if k in table]
        for key in ("dir", "url", "url-env", "namespace"):
            if key in table and not isinstance(table[key], str):
                self.bad("CFG-2", f"state.{key} must be a string", ("state", key))
                given = []
        namespace = str(table.get("namespace", "default"))
        if len(given) > 1:
            self.bad(
                "CFG-10", "give only one of state.dir, state.url and state.url-env", ("state",)
            )
        elif "namespace" in table and not (set(given) & {"url", "url-env"}):
            self.bad("CFG-10", "state.namespace goes with url or url-env", ("state", "namespace"))
        elif given == ["dir"]:
            folder = os.path.normpath(os.path.join(self.folder, table["dir"]))
            return StoreSpec("dir", folder, "default")
        elif given == ["url"]:
            if not str(table["url"]).startswith(("postgresql://", "postgres://")):
                self.bad("CFG-10", "state.url must be a postgresql:// URL", ("state", "url"))
            return StoreSpec("url", table["url"], namespace)
        elif given == ["url-env"]:
            # whether the variable is set is no fact of the file (the cache keeps what the
            # files say): the store says so at each use, validate when it runs (cli/validate.py)
            return StoreSpec("url-env", table["url-env"], namespace)
        return self.default_store

    def harness(self, data: dict[str, Any]) -> dict[str, tuple[str, ...]]:
        """`[harness.NAME] without`: the parts of a harness the user declined (CFG-11)."""
        without: dict[str, tuple[str, ...]] = {}
        table = data.get("harness")
        if not isinstance(table, dict):
            return without
        for name, entry in table.items():
            if name not in HARNESS_PARTS:
                message = f"no harness {name} ({', '.join(HARNESS_PARTS)})"
                self.bad("CFG-11", message, ("harness", name), True)
                continue
            if not isinstance(entry, dict):
                self.bad("CFG-2", f"harness.{name} must be a table", ("harness", name))
                continue
            parts = entry.get("without", [])
            if not isinstance(parts, list):
                message = f"harness.{name}.without must be a list"
                self.bad("CFG-2", message, ("harness", name, "without"))
                continue
            for index, part in enumerate(parts):
                if part not in HARNESS_PARTS[name]:
                    message = f"{name} has no part {part} (parts: {', '.join(HARNESS_PARTS[name])})"
                    self.bad("CFG-11", message, ("harness", name, "without", index))
            without[name] = tuple(str(p) for p in parts)
        return without
