"""validate's INS rules: the saved instances of each config's store, checked against the
machines that config now loads (validation.md §2.6). Reads only: a store that doesn't exist
yet is not created, and nothing is migrated."""

from __future__ import annotations

from collections import Counter

from ..engine.records import ACTIVE, COMPLETED, INTERRUPTED, PAUSED
from ..machine.config import Loaded, StoreSpec, config_finding
from ..machine.findings import Finding
from ..machine.model import Machine
from ..machine.regex import pattern_matches
from ..store.base import SavedRow, StoreError
from .stores import open_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check_saved"]


def check_saved(loaded: Loaded) -> list[Finding]:
    """INS findings for every store of `loaded`'s configs that loaded without errors."""
    broken = {f.file for f in loaded.findings if f.level == "error"}
    findings: list[Finding] = []
    seen: set[StoreSpec] = set()
    for config, spec in loaded.config_stores.items():
        if config in broken or spec in seen:
            continue  # a config with errors adds no machines; a shared store is read once
        seen.add(spec)
        machines = {m: x for m, x in loaded.machines.items() if loaded.stores.get(m) == spec}
        try:
            store = open_store(spec)
            try:
                rows = store.saved()
            finally:
                store.close()
        except (StoreError, OSError) as exc:
            # at the [state] key that names the store; the default store has no key
            at = ("state", spec.kind) if spec.kind != "dir" or _names_dir(config) else None
            message = f"saved instances weren't checked: {exc}"
            findings.append(_in_config(config, "INS-5", message, at))
            continue
        findings += _check_rows(rows, machines, config)
    return findings


def _config_text(config: str) -> str:
    try:
        with open(config, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _names_dir(config: str) -> bool:
    import tomllib

    try:
        state = tomllib.loads(_config_text(config)).get("state")
    except tomllib.TOMLDecodeError:
        return False
    return isinstance(state, dict) and "dir" in state


def _in_config(config: str, rule: str, message: str, at: tuple[str, ...] | None) -> Finding:
    """A finding about `config`, at the node `at` when the file has one."""
    return config_finding(config, _config_text(config), rule, message, at)


def _yaml_doc(file: str) -> Any:
    """The YAML tree of a machine file, for positions; None when it can't be read now."""
    from ..machine.yamltree import YamlError, load_yaml

    try:
        with open(file, "rb") as f:
            return load_yaml(f.read())
    except (OSError, YamlError):
        return None


def _in_machine(
    machine: Machine, doc: Any, rule: str, message: str, at: tuple[str, ...]
) -> Finding:
    """A finding about `machine`'s file, at the node `at` of its tree `doc` (the key for
    `states`, else the value), or the nearest node above it."""
    line = col = None
    probe = at
    while doc is not None and probe:
        pos = doc.value_pos.get(probe) if probe != ("states",) else doc.key_pos.get(probe)
        if pos is not None:
            line, col = pos.line, pos.col
            break
        probe = probe[:-1]
    return Finding.make(rule, machine.file, message, path=at, line=line, col=col)


def _check_rows(rows: list[SavedRow], machines: dict[str, Machine], config: str) -> list[Finding]:
    out: list[Finding] = []
    orphans: Counter[str] = Counter()
    docs: dict[str, Any] = {}  # each machine file parsed once, however many rows name it

    def at_node(machine: Machine, rule: str, message: str, at: tuple[str, ...]) -> Finding:
        if machine.file not in docs:
            docs[machine.file] = _yaml_doc(machine.file)
        return _in_machine(machine, docs[machine.file], rule, message, at)

    for row in rows:
        machine = machines.get(row.machine)
        inst = row.instance
        if inst is None:
            where = machine.file if machine is not None else config
            out.append(
                Finding.make("INS-4", where, f"instance {row.id} can't be read: {row.problem}")
            )
            continue
        if machine is None:
            if inst.status != COMPLETED:
                orphans[inst.machine] += 1
            continue
        name = f"{machine.kind} {inst.label}"
        if inst.status in (ACTIVE, INTERRUPTED, PAUSED) and inst.state not in machine.states:
            # at `states:`, where the state would have to come back
            message = f"{name} is saved in {inst.state}, which no longer exists"
            out.append(at_node(machine, "INS-1", message, ("states",)))
        back = inst.resume_state
        if inst.status != COMPLETED and back is not None and back not in machine.states:
            message = f"{name} would return to {back}, which no longer exists"
            out.append(at_node(machine, "INS-2", message, ("states",)))
        pattern = machine.ref.pattern
        if inst.ref is not None and pattern is not None and not pattern_matches(pattern, inst.ref):
            message = f"{machine.kind} {inst.ref} no longer matches {pattern}"
            out.append(at_node(machine, "INS-6", message, ("meta", "instance", "ref", "pattern")))
    for mid, count in orphans.items():
        noun = "saved instance" if count == 1 else "saved instances"
        message = f"{count} {noun} of {mid}, which is not configured"
        out.append(_in_config(config, "INS-3", message, ("machines", "files")))
    return out
