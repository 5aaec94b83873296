"""Configs: finding them (machine-format.md §1.1), reading them (reader.py), and combining the
user's and the project's machines (§1.2) into one `Loaded` set.

`tomllib` (stdlib) reads configs; `tomlkit` is only for editing them (`smllm new --write`).
"""

from __future__ import annotations

import os

from ..findings import Finding
from ..model import IdlePrompt, Loaded, Machine, StoreSpec
from .reader import HARNESS_PARTS, ConfigFile, config_finding, read_config, shown_path

__all__ = [
    "HARNESS_PARTS",
    "ConfigFile",
    "config_finding",
    "find_configs",
    "load_configs",
    "read_config",
    "shown_path",
    "user_config_path",
]


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
