"""validate's INS rules: the saved instances of each config's store, checked against the
machines that config now loads (validation.md §2.6). Reads only: a store that doesn't exist
yet is not created, and nothing is migrated."""

from __future__ import annotations

from collections import Counter

from ..engine.records import ACTIVE, COMPLETED, INTERRUPTED, PAUSED
from ..machine.findings import Finding
from ..machine.model import Loaded, Machine, StoreSpec
from ..machine.regex import pattern_matches
from ..store.base import SavedRow, StoreError
from .stores import open_store

__all__ = ["check_saved"]


def check_saved(loaded: Loaded, so_far: list[Finding] | None = None) -> list[Finding]:
    """INS findings for every store of `loaded`'s configs without errors, in `so_far` (the
    findings made already; default: the load's).

    validation.md §2.6: a finding names the machine file and no line (the instance is in the
    store, not at a node of the file); INS-5, and INS-3 and INS-4 of a machine that isn't
    configured, name the config file whose store it is."""
    broken = {f.file for f in (loaded.findings if so_far is None else so_far) if f.level == "error"}
    # validation.md §1: INS rules run only on machines without errors; the instances of a
    # machine whose file has errors are neither checked nor "not configured" (INS-3), unless
    # another file gives that id a machine (CFG-4 keeps the first)
    unchecked = set(loaded.withdrawn) - set(loaded.machines)
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
            message = f"saved instances weren't checked: {exc}"
            findings.append(Finding.make("INS-5", config, message))
            continue
        rows = [r for r in rows if r.machine not in unchecked]
        findings += _check_rows(rows, machines, config)
    return findings


def _check_rows(rows: list[SavedRow], machines: dict[str, Machine], config: str) -> list[Finding]:
    out: list[Finding] = []
    orphans: Counter[str] = Counter()
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
            message = f"{name} is saved in {inst.state}, which no longer exists"
            out.append(Finding.make("INS-1", machine.file, message))
        back = inst.resume_state
        if inst.status != COMPLETED and back is not None and back not in machine.states:
            message = f"{name} would return to {back}, which no longer exists"
            out.append(Finding.make("INS-2", machine.file, message))
        pattern = machine.ref.pattern
        if inst.ref is not None and pattern is not None and not pattern_matches(pattern, inst.ref):
            message = f"{machine.kind} {inst.ref} no longer matches {pattern}"
            out.append(Finding.make("INS-6", machine.file, message))
    for mid, count in orphans.items():
        noun = "saved instance" if count == 1 else "saved instances"
        message = f"{count} {noun} of {mid}, which is not configured"
        out.append(Finding.make("INS-3", config, message))
    return out
