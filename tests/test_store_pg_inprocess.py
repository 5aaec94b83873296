"""The PostgreSQL store in process, on the real test server: the schema is made by the first
write and never by a read, a newer schema is refused, and a writer waits for a row lock only
as long as lock_timeout while readers go on (the CLI's side: tests/test_store_postgres.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.storerows import StoreRows, fresh_database, host, lock_row

from smllm.errors import StoreBusy, StoreTooNew


def pg_inst(id: str, ref: str | None = None) -> Any:
    from smllm.engine.records import HistoryRecord, Instance, InstanceWrite

    t = "2026-01-01T00:00:00.000000Z"
    i = Instance(
        id, "dev", ref or f"R-{id}", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, t, t
    )
    h = HistoryRecord(t, "k", "agent", "enter", {}, None, "PLAN", None, "active", 1, ())
    return InstanceWrite(i, 0, h)


def test_reads_never_make_the_schema_and_the_first_write_does(pg_server: Any) -> None:
    from smllm.store.postgres import SCHEMA_VERSION, PostgresStore

    url = fresh_database(pg_server)
    rows = StoreRows(None, url, "ns")
    store = PostgresStore(url, "ns")
    assert store.instance("dev", "a") is None and store.find("dev", "a") is None
    assert store.taken("dev", "a") is False and store.paused(["dev"], None) == ([], 0)
    assert store.instances(None, None) == [] and store.held_by("k") == []
    assert store.saved() == [] and store.history("dev", "a") == []
    assert not rows.exists()
    store.commit_instances([pg_inst("a")])
    assert rows.schema_version() == SCHEMA_VERSION == 1
    assert [d["id"] for d in rows.instance_rows()] == ["a"]
    # another namespace of the same database: empty, and the same id and ref are free there
    other = PostgresStore(url, "other")
    assert other.instances(None, None) == [] and not other.taken("dev", "R-a")
    other.commit_instances([pg_inst("a")])
    assert StoreRows(None, url, "other").count() == rows.count() == 1
    store.close()
    other.close()


def test_a_newer_schema_is_refused_in_process(pg_server: Any) -> None:
    from smllm.store.postgres import PostgresStore

    url = fresh_database(pg_server)
    store = PostgresStore(url, "ns")
    store.commit_instances([pg_inst("a")])
    store.close()
    StoreRows(None, url, "ns")._pg("UPDATE smllm.meta SET value = '2' WHERE key = 'schema'")
    for call in (
        lambda s: s.instances(None, None),
        lambda s: s.commit_instances([pg_inst("b")]),
    ):
        fresh = PostgresStore(url, "ns")
        with pytest.raises(StoreTooNew) as caught:
            call(fresh)
        assert str(caught.value) == (
            f"the store at {host(pg_server)} (namespace ns) was written by a newer smllm"
        )
        fresh.close()
    assert StoreRows(None, url, "ns").count() == 1


def test_a_writer_waits_for_a_row_lock_then_is_busy(
    pg_url: str, pg_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from smllm.engine.records import InstanceWrite
    from smllm.store.postgres import PostgresStore

    store = PostgresStore(pg_url, pg_namespace)
    first = pg_inst("a")
    store.commit_instances([first])
    store.close()
    monkeypatch.setattr("smllm.store.postgres.LOCK_TIMEOUT_MS", 200)
    locker = lock_row(pg_url, pg_namespace)
    moved = first.instance._replace(version=2, state="WORK")
    try:
        began = time.monotonic()
        with pytest.raises(StoreBusy) as caught:
            store.commit_instances([InstanceWrite(moved, 1, first.history)])
        assert 0.2 <= time.monotonic() - began < 5
        assert str(caught.value) == "the store is busy"
        assert store.instance("dev", "a") == first.instance  # a reader isn't held up
    finally:
        locker.rollback()
        locker.close()
    store.commit_instances([InstanceWrite(moved, 1, first.history)])
    assert store.instance("dev", "a") == moved
    store.close()
