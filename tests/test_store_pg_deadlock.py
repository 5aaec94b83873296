"""A commit the server rolls back to break a deadlock is run again (nothing of it was
committed), and then the version checks say who lost: never `unreachable`."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from smllm.engine.records import HistoryRecord, Instance, InstanceWrite
from smllm.store.postgres import PostgresStore

T = "2026-01-01T00:00:00.000000Z"


def new(id: str) -> InstanceWrite:
    i = Instance(id, "dev", f"R-{id}", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T, T)
    h = HistoryRecord(T, "k", "agent", "enter", {}, None, "PLAN", None, "active", 1, ())
    return InstanceWrite(i, 0, h)


def moved(w: InstanceWrite) -> InstanceWrite:
    return InstanceWrite(w.instance._replace(version=2, status="paused"), 1, w.history)


def test_a_deadlock_victim_is_run_again(pg_url: str, pg_namespace: str) -> None:
    store = PostgresStore(pg_url, pg_namespace)
    a, b = new("a"), new("b")
    store.commit_instances([a, b])
    other = psycopg.connect(pg_url)
    sql = "UPDATE smllm.instances SET updated = updated WHERE namespace = %s AND id = %s"
    other.execute(sql, (pg_namespace, "a"))  # holds a
    outcome: list[Any] = []

    def commit() -> None:  # takes b, then waits for a: it waits first, so it is the victim
        try:
            store.commit_instances([moved(b), moved(a)])
            outcome.append("committed")
        except Exception as exc:  # the test reads what it was
            outcome.append(exc)

    writer = threading.Thread(target=commit)
    writer.start()
    # the writer waits for `a` before `other` asks for `b`: the writer, waiting longer, runs
    # the deadlock check first and is the one rolled back
    watch = psycopg.connect(pg_url, autocommit=True)
    deadline = time.monotonic() + 30
    while not watch.execute(
        "SELECT 1 FROM pg_stat_activity WHERE application_name = 'smllm' "
        "AND wait_event_type = 'Lock'"
    ).fetchall():
        assert time.monotonic() < deadline, "the writer never waited for the row"
        time.sleep(0.02)
    watch.close()
    other.execute(sql, (pg_namespace, "b"))  # now each waits for the other: a deadlock
    time.sleep(0.5)
    other.rollback()  # the retried commit then finds both rows as it read them
    other.close()
    writer.join(30)
    assert outcome == ["committed"]
    assert [store.instance("dev", x).version for x in ("a", "b")] == [2, 2]  # type: ignore[union-attr]
    assert len(store.history("dev", "a")) == len(store.history("dev", "b")) == 2
    store.close()
