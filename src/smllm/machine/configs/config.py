"""Configs: finding them (machine-format.md §1.1), reading them (reader.py), and combining the
user's and the project's machines (§1.2) into one `Loaded` set.

`tomllib` (stdlib) reads configs; `tomlkit` is only for editing them (`smllm new --write`).
"""

from __future__ import annotations

import os

from ..findings import Finding
from ..model import IdlePrompt, Loaded, Machine, StoreSpec
from .reader import HARNESS_PARTS, ConfigFile, config_finding, read_config, shown_path

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..loader.load import LoadResult

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
    read = [read_config(p, cwd) for p in configs if os.path.isfile(p)]
    combined = _Combined(cwd)
    project = read[-1] if len(read) > 1 else None
    for cfg in read:
        combined.add(cfg, is_project=cfg is project)
    combined.case_clashes()
    config_stores = {cfg.path: cfg.store for cfg in read}
    looked = (*combined.looked, *(p for p in configs if not os.path.isfile(p)))  # missing too
    return Loaded(
        tuple(configs),
        combined.machines,
        combined.stores,
        config_stores,
        combined.idle,
        tuple(combined.findings),
        looked,
        tuple(combined.withdrawn),
    )


class _Combined:
    """The machines of the configs read so far (machine-format.md §1.2): a later config's
    machine replaces an earlier one's, and the findings of each step (CFG-4 … CFG-8)."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.machines: dict[str, Machine] = {}
        self.stores: dict[str, StoreSpec] = {}
        self.owner: dict[str, str] = {}  # machine id → the file that defined it
        self.owner_at: dict[str, tuple[int | None, int | None]] = {}  # … and where its id is
        self.findings: list[Finding] = []
        self.looked: list[str] = []  # every file read or looked for, in load order (cache key)
        self.withdrawn: list[str] = []
        self.idle: IdlePrompt | None = None

    def load(self, full: str) -> LoadResult:
        """A listed machine file, its findings and reads kept; the id of one with errors too."""
        from ..loader.load import load_machine_file

        result = load_machine_file(full, shown_path(full, self.cwd))
        self.findings.extend(result.findings)
        self.looked.extend(result.reads)
        if result.machine is None and result.top_id:
            self.withdrawn.append(result.top_id)
        return result

    def add(self, cfg: ConfigFile, is_project: bool) -> None:
        self.looked.append(cfg.path)  # load order: each config, then its machine files
        self.findings.extend(cfg.findings)
        if not cfg.ok:
            self._broken(cfg, is_project)
            return
        if cfg.idle is not None:
            self.idle = cfg.idle
        this_config: dict[str, str] = {}
        for full, _entry in cfg.machine_files:
            self.looked.append(full)
            self._machine(cfg, full, is_project, this_config)

    def _broken(self, cfg: ConfigFile, is_project: bool) -> None:
        """A config with an error adds no machines; a project config that isn't valid TOML or
        has unknown keys (CFG-1, CFG-2) also withdraws the user's (CFG-7)."""
        # its machine files, found or not, are still part of the cache key: a missing one
        # (CFG-3) created later must be seen without the config being touched
        self.looked.extend(cfg.listed)
        # every finding at once (validation.md §1): the listed files that are there are still
        # checked, though a config with an error adds none of their machines
        for full, _entry in cfg.machine_files:
            self.load(full)
        if is_project and any(f.rule in ("CFG-1", "CFG-2") for f in cfg.findings):
            self.findings.append(
                _bad(
                    "CFG-7",
                    shown_path(cfg.path, self.cwd),
                    "the project config has errors, so no machine is loaded, the user's included",
                )
            )
            self.machines.clear()
            self.stores.clear()

    def _machine(
        self, cfg: ConfigFile, full: str, is_project: bool, this_config: dict[str, str]
    ) -> None:
        """One machine file of a valid config: added, or the finding that keeps it out."""
        shown = shown_path(full, self.cwd)
        result = self.load(full)
        if result.machine is None:
            top = result.top_id
            if is_project and top and top in self.machines:
                message = (
                    f"the user's machine {top} is not loaded either, because {shown} has errors"
                )
                hint = f"fix {shown}; smllm never falls back to the user's copy"
                self.findings.append(_bad("CFG-8", shown, message, hint=hint))
                del self.machines[top]
                self.stores.pop(top, None)
            return
        mid = result.machine.id
        id_at = result.id_at or (None, None)
        if mid in this_config:
            other = shown_path(this_config[mid], self.cwd)
            message = f"machine {mid} is also defined in {other}"
            self.findings.append(_bad("CFG-4", shown, message, ("id",), *id_at))
            return
        this_config[mid] = full
        if mid in self.machines:
            if is_project:
                owner = shown_path(self.owner[mid], self.cwd)
                message = f"replaces the user's machine {mid} ({owner})"
                self.findings.append(_bad("CFG-6", shown, message, ("id",), *id_at))
            del self.machines[mid]
        self.machines[mid] = result.machine
        self.stores[mid] = cfg.store
        self.owner[mid] = full
        self.owner_at[mid] = id_at

    def case_clashes(self) -> None:
        """CFG-5: ids that differ only in case; an error withdraws the machine it is found in
        (validation.md §1): the later one."""
        lowered: dict[str, str] = {}
        for mid in list(self.machines):
            low = mid.lower()
            if low not in lowered:
                lowered[low] = mid
                continue
            message = f"machine ids {lowered[low]} and {mid} differ only in case"
            shown = shown_path(self.owner[mid], self.cwd)
            self.findings.append(_bad("CFG-5", shown, message, ("id",), *self.owner_at[mid]))
            del self.machines[mid]
            self.stores.pop(mid, None)
            self.withdrawn.append(mid)
