"""Records for the SQLite store's tests (test_store_sqlite.py, test_store_migrate.py): an
instance by id, and the write that creates it with its history record."""

from __future__ import annotations

from smllm.engine.records import HistoryRecord, Instance, InstanceWrite

T0 = "2026-01-01T00:00:00.000000Z"


def inst(id: str) -> Instance:
    """Instance ID of dev (ref R-ID), active in PLAN, version 1."""
    return Instance(id, "dev", f"R-{id}", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T0, T0)


def new(i: Instance) -> InstanceWrite:
    """The write that creates `i`, with its enter record."""
    h = HistoryRecord(T0, "k", "agent", "enter", {}, None, i.state, None, i.status, i.version, ())
    return InstanceWrite(i, 0, h)
