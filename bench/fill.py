"""Filling a project's store for the benchmark: paused and completed `dev` instances, with their
history, written straight into the tables (through smllm's own records and JSON codec, so the
rows are what smllm writes), in one transaction."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["populate", "store_counts"]

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def crockford(n: int) -> str:
    out = []
    for _ in range(6):
        out.append(ALPHABET[n % 32])
        n //= 32
    return "".join(reversed(out))


def iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def populate(project: str, paused: int, completed: int, start: int) -> str:
    """Write `paused` paused and `completed` completed `dev` instances into the project's store.

    Completed ones have three history records (enter, planned, done); paused ones two (enter,
    pause). The library makes the store (as a first call would) and the records, whose JSON
    goes straight into its tables in one transaction: the rows `commit_instances` would leave,
    without its update per event (10,000 instances in well under a second). Returns the
    store's path.
    """
    from smllm.api.stores import Stores, user_store
    from smllm.engine.records import COMPLETED, PAUSED, HistoryRecord, Instance
    from smllm.jsontext import dumps
    from smllm.machine.configs.cache import load_cached
    from smllm.machine.configs.config import find_configs

    loaded = load_cached(find_configs(project, None))
    store: Any = Stores(loaded, user_store()).store_of("dev")
    assert store is not None
    store.commit_instances([])  # creates the database and its tables
    path = str(store.path)
    store.close()
    base = datetime.now(UTC) - timedelta(days=400)
    who = "sm-bench0"

    def hist(at: str, event: str, frm: str | None, to: str, status: str, v: int) -> Any:
        params = {"stateMachine": "dev"} if event == "enter" else {}
        arrival = "enter (new issue)" if event == "enter" else None
        return HistoryRecord(at, who, "agent", event, params, frm, to, arrival, status, v, ())

    def one(n: int, status: str) -> tuple[Any, list[Any]]:
        created = base + timedelta(seconds=60 * n)
        at = [iso(created + timedelta(seconds=s)) for s in (0, 20, 40)]
        iid, ref = "i-" + crockford(n), f"GH-{n}"
        first = Instance(
            iid, "dev", ref, "PLAN", "active", who, at[0], 1, {"PLAN": 1}, None, at[0], at[0]
        )
        records = [hist(at[0], "enter", None, "PLAN", "active", 1)]
        if status == COMPLETED:
            done = first._replace(
                state="DONE",
                status=COMPLETED,
                holder=None,
                version=3,
                visits={"PLAN": 1, "WORK": 1, "DONE": 1},
                updated=at[2],
            )
            records.append(hist(at[1], "planned", "PLAN", "WORK", "active", 2))
            records.append(hist(at[2], "done", "WORK", "DONE", COMPLETED, 3))
            return done, records
        gone = first._replace(status=PAUSED, holder=None, version=2, updated=at[1])
        records.append(hist(at[1], "pause", "PLAN", "PLAN", PAUSED, 2))
        return gone, records

    rows: list[tuple[Any, ...]] = []
    history: list[tuple[str, str]] = []
    kinds = [COMPLETED] * completed + [PAUSED] * paused  # paused ones are the most recent
    for n, status in enumerate(kinds, start=start):
        i, records = one(n, status)
        rows.append((i.id, i.machine, i.ref, i.status, i.updated, i.version, dumps(i.to_json())))
        history += [(i.id, dumps(h.to_json())) for h in records]
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO instances (id, machine, ref, status, updated, version, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.executemany("INSERT INTO history (instance, data) VALUES (?, ?)", history)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path


def store_counts(path: str) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT status, count(*) FROM instances GROUP BY status ORDER BY status"
        ).fetchall()
        hist = conn.execute("SELECT count(*) FROM history").fetchone()[0]
    finally:
        conn.close()
    return ", ".join(f"{n} {s}" for s, n in rows) + f"; {hist} history records"


# -- in-process timing ----------------------------------------------------------------------------
