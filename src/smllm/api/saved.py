"""validate's INS rules: the saved instances of each config's store, checked against the
machines that config now loads (validation.md §2.6). Reads only: a store that doesn't exist
yet is not created, and nothing is migrated."""

from __future__ import annotations

from collections import Counter

from ..engine.records import ACTIVE, COMPLETED, INTERRUPTED, PAUSED
from ..machine.config import Loaded, StoreSpec
from ..machine.findings import Finding
from ..machine.model import Machine
from ..machine.regex import pattern_matches
from ..store.base import SavedRow, StoreError
from .stores import open_store

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
            findings.append(
                Finding.make("INS-5", config, f"saved instances weren't checked: {exc}")
            )
            continue
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
            out.append(
                Finding.make(
                    "INS-1",
                    machine.file,
                    f"{name} is saved in {inst.state}, which no longer exists",
                )
            )
        back = inst.resume_state
        if inst.status != COMPLETED and back is not None and back not in machine.states:
            out.append(
                Finding.make(
                    "INS-2", machine.file, f"{name} would return to {back}, which no longer exists"
                )
            )
        pattern = machine.ref.pattern
        if inst.ref is not None and pattern is not None and not pattern_matches(pattern, inst.ref):
            out.append(
                Finding.make(
                    "INS-6", machine.file, f"{machine.kind} {inst.ref} no longer matches {pattern}"
                )
            )
    for mid, count in orphans.items():
        noun = "saved instance" if count == 1 else "saved instances"
        out.append(
            Finding.make("INS-3", config, f"{count} {noun} of {mid}, which is not configured")
        )
    return out
