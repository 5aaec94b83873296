"""The stores' contract, exactly (store/base.py, sqlite.py, user.py): record checks, every
query's filter and order, all-or-nothing commits, and how a store is created, read and
refused. The instance store's part runs on both backends (`istore`: SQLite, and a namespace of
the real PostgreSQL test server), with the same expectations."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from smllm.engine.records import (
    AuditRecord,
    HistoryRecord,
    Instance,
    InstanceWrite,
    Place,
    Session,
    SessionWrite,
)
from smllm.errors import RefTaken, StoreBusy, StoreConflict, StoreError, StoreTooNew
from smllm.store.base import InstanceStore, SavedRow, read_instance
from smllm.store.postgres import PostgresStore
from smllm.store.sqlite import SqliteStore
from smllm.store.user import state_home, user_store

T = "2026-01-01T00:00:0{}.000000Z"


def inst(id: str, n: int = 1, **changes: Any) -> Instance:
    i = Instance(
        id, "dev", f"R-{id}", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T0, T.format(n)
    )
    return i._replace(**changes)


T0 = T.format(0)


def hist(i: Instance, event: str = "enter") -> HistoryRecord:
    return HistoryRecord(
        i.updated, "k", "agent", event, {}, None, i.state, None, i.status, i.version, ()
    )


def new(i: Instance) -> InstanceWrite:
    return InstanceWrite(i, 0, hist(i))


def sess(key: str = "k", n: int = 0, **changes: Any) -> Session:
    s = Session(key, "claude", f"h-{key}", "/p", ("c",), None, None, False, 0, 1, T0, T.format(n))
    return s._replace(**changes)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(str(tmp_path / "s" / "store.db"))


def raw(store: SqliteStore, sql: str, args: tuple[Any, ...] = ()) -> None:
    with sqlite3.connect(store.path) as conn:
        conn.execute(sql, args)


@pytest.fixture(params=["sqlite", "postgres"])
def istore(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[InstanceStore]:
    """An empty instance store on each backend."""
    store: InstanceStore
    if request.param == "sqlite":
        store = SqliteStore(str(tmp_path / "s" / "store.db"))
    else:
        url = request.getfixturevalue("pg_url")
        store = PostgresStore(url, request.getfixturevalue("pg_namespace"))
    yield store
    store.close()


def set_column(store: InstanceStore, id: str, column: str, value: str) -> None:
    """Damage instance row ID behind the store's back, as a user editing it would."""
    if isinstance(store, SqliteStore):
        raw(store, f"UPDATE instances SET {column} = ? WHERE id = ?", (value, id))
        return
    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE smllm.instances SET {column} = %s WHERE namespace = %s AND id = %s",
            (value, store.namespace, id),
        )


def idle(store: InstanceStore) -> bool:
    """No transaction left open on the store's connection."""
    if isinstance(store, SqliteStore):
        return store._conn is not None and not store._conn.in_transaction
    assert isinstance(store, PostgresStore) and store._conn is not None
    return store._conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


# --- base.read_instance -----------------------------------------------------------------------


def good() -> dict[str, Any]:
    return inst("a").to_json()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": True}, "version has the wrong type"),
        ({"version": "1"}, "version has the wrong type"),
        ({"id": None}, "id has the wrong type"),
        ({"visits": []}, "visits has the wrong type"),
        ({"extra": 1, "more": 2}, "unknown field extra (written by a newer smllm?)"),
        ({"status": "gone"}, "unknown status gone (written by a newer smllm?)"),
        ({"visits": {"PLAN": True}}, "visits must count with integers"),
        ({"visits": {"PLAN": 1.0}}, "visits must count with integers"),
    ],
)
def test_read_instance_refuses(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        read_instance(json.dumps({**good(), **change}))
    assert str(caught.value) == message


def test_read_instance_messages_of_shape() -> None:
    for text, message in (
        ("[1]", "not a JSON object"),
        ("{", "not valid JSON: "),
    ):
        with pytest.raises(ValueError) as caught:
            read_instance(text)
        assert str(caught.value).startswith(message)
    data = good()
    del data["holderSeen"]
    with pytest.raises(ValueError, match=r"^missing holderSeen$"):
        read_instance(json.dumps(data))


def test_read_instance_accepts_nulls_where_allowed() -> None:
    i = inst("a", ref=None, holder=None, holder_seen=None, resume_state=None, status="paused")
    assert read_instance(json.dumps(i.to_json())) == i
    for status in ("active", "interrupted", "paused", "completed"):
        assert read_instance(json.dumps({**good(), "status": status})).status == status


# --- creating, opening, refusing --------------------------------------------------------------


def test_reads_never_create_the_store(store: SqliteStore) -> None:
    assert store.instance("dev", "a") is None
    assert store.find("dev", "a") is None
    assert store.taken("dev", "a") is False
    assert store.paused(["dev"], None) == ([], 0)
    assert store.instances(None, None) == []
    assert store.sessions() == [] and store.session("k") is None
    assert not Path(store.path).parent.exists()


def test_the_first_write_creates_folder_tables_and_settings(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "a" / "b" / "store.db"), gitignore=True)
    store.commit_instances([new(inst("a"))])
    assert (tmp_path / "a" / "b" / ".gitignore").read_text() == "*\n"
    conn = store._conn
    assert conn is not None
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert conn.in_transaction is False
    store.close()
    assert store._conn is None
    store.close()
    again = SqliteStore(store.path, durable=False)
    assert again.instance("dev", "a") == inst("a")
    assert again._conn is not None and again._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_no_gitignore_unless_asked(store: SqliteStore) -> None:
    store.append_audit("k", ())
    assert sorted(p.name for p in Path(store.path).parent.iterdir())[0] == "store.db"
    assert not (Path(store.path).parent / ".gitignore").exists()


def test_a_folder_that_cant_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    store = SqliteStore(str(tmp_path / "file" / "sub" / "store.db"))
    with pytest.raises(StoreError) as caught:
        store.append_audit("k", ())
    assert str(caught.value) == f"can't create {tmp_path / 'file' / 'sub'}: Not a directory"


def test_a_newer_store_is_refused(store: SqliteStore) -> None:
    store.append_audit("k", ())
    store.close()
    raw(store, "PRAGMA user_version = 2")
    with pytest.raises(StoreTooNew) as caught:
        store.sessions()
    assert str(caught.value) == f"{store.path} was written by a newer smllm"


def test_an_empty_database_reads_as_empty_and_is_migrated_on_write(store: SqliteStore) -> None:
    Path(store.path).parent.mkdir()
    raw(store, "CREATE TABLE other (x)")
    assert store.sessions() == [] and store._conn is None
    store.append_audit("k", (AuditRecord(T0, "bind", {"a": 1}),))
    assert store.audit("k") == [AuditRecord(T0, "bind", {"a": 1})]


def test_a_damaged_file(store: SqliteStore) -> None:
    Path(store.path).parent.mkdir()
    Path(store.path).write_bytes(b"not a database at all, " * 100)
    with pytest.raises(StoreError) as caught:
        store.sessions()
    assert str(caught.value) == f"{store.path}: file is not a database"


def test_busy_and_other_errors(store: SqliteStore) -> None:
    assert isinstance(store._error(sqlite3.OperationalError("database is locked")), StoreBusy)
    assert isinstance(store._error(sqlite3.OperationalError("database busy")), StoreBusy)
    other = store._error(sqlite3.OperationalError("no such table: x"))
    assert type(other) is StoreError and str(other) == f"{store.path}: no such table: x"
    store.append_audit("k", ())
    with pytest.raises(StoreError) as caught:
        store._read("SELECT * FROM absent")
    assert str(caught.value) == f"{store.path}: no such table: absent"


def test_a_write_waits_for_the_lock_then_is_busy(store: SqliteStore, monkeypatch: Any) -> None:
    store.append_audit("k", ())
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    monkeypatch.setattr("smllm.store.sqlite.BUSY_TIMEOUT_SECS", 0.05)
    store._conn.execute("PRAGMA busy_timeout = 50")  # type: ignore[union-attr]
    with pytest.raises(StoreBusy):
        store.append_audit("k", (AuditRecord(T0, "x", {}),))
    other.execute("ROLLBACK")
    assert store.audit("k") == []


# --- instances --------------------------------------------------------------------------------


def test_instance_find_and_taken(istore: InstanceStore) -> None:
    store = istore
    a = inst("a")
    store.commit_instances([new(a), new(inst("b", ref=None, machine="ops"))])
    assert store.instance("dev", "a") == a
    assert store.instance("ops", "a") is None
    assert store.find("dev", "a") == a and store.find("dev", "R-a") == a
    assert store.find("ops", "R-a") is None and store.find("dev", "R-x") is None
    assert store.taken("dev", "a") and store.taken("dev", "R-a") and store.taken("ops", "a")
    assert not store.taken("ops", "R-a") and not store.taken("dev", "zz")
    assert store.history("dev", "a") == [hist(a)]


def test_commits_update_conflict_and_ref_taken(istore: InstanceStore) -> None:
    store = istore
    a = inst("a")
    store.commit_instances([new(a)])
    moved = a._replace(version=2, state="WORK", ref="R-new", status="paused")
    store.commit_instances([InstanceWrite(moved, 1, hist(moved, "go"))])
    assert store.instance("dev", "a") == moved
    assert store.find("dev", "R-new") == moved and store.find("dev", "R-a") is None
    with pytest.raises(StoreConflict) as conflict:
        store.commit_instances([InstanceWrite(moved._replace(version=3), 1, hist(moved))])
    assert (conflict.value.machine, conflict.value.id) == ("dev", "a")
    with pytest.raises(RefTaken) as taken:
        store.commit_instances([new(inst("b", ref="R-new"))])
    assert (taken.value.machine, taken.value.ref) == ("dev", "R-new")
    with pytest.raises(RefTaken) as taken:
        store.commit_instances([new(inst("a", ref=None))])
    assert (taken.value.machine, taken.value.ref) == ("dev", "a")
    store.commit_instances([new(inst("c", ref="R-c"))])
    with pytest.raises(RefTaken) as taken:
        c2 = inst("c", version=2, ref="R-new")
        store.commit_instances([InstanceWrite(c2, 1, hist(c2))])
    assert (taken.value.machine, taken.value.ref) == ("dev", "R-new")
    assert [h.event for h in store.history("dev", "a")] == ["enter", "go"]


def test_a_commit_is_all_or_nothing(istore: InstanceStore) -> None:
    store = istore
    store.commit_instances([new(inst("a"))])
    with pytest.raises(StoreConflict):
        store.commit_instances(
            [new(inst("b")), InstanceWrite(inst("a", version=5), 4, hist(inst("a")))]
        )
    assert store.instance("dev", "b") is None and store.history("dev", "b") == []
    assert idle(store)


def test_paused_order_limit_and_damaged_rows(istore: InstanceStore) -> None:
    store = istore
    p = {"status": "paused", "holder": None}
    rows = [
        inst("a", 1, **p),
        inst("b", 3, **p, machine="ops"),
        inst("c", 3, **p, ref="A"),
        inst("d", 3, **p, ref=None),
        inst("e", 4),  # active
        inst("f", 2, **p, machine="other"),
    ]
    store.commit_instances([new(i) for i in rows])
    found, count = store.paused(["dev", "ops"], None)
    assert [i.id for i in found] == ["c", "d", "b", "a"] and count == 4
    found, count = store.paused(["dev", "ops"], 2)
    assert [i.id for i in found] == ["c", "d"] and count == 4
    assert store.paused([], None) == ([], 0)
    set_column(store, "d", "data", "{}")
    found, count = store.paused(["dev", "ops"], 2)
    assert [i.id for i in found] == ["c"] and count == 3
    assert [r.id for r in store.saved() if r.problem] == ["d"]
    set_column(store, "d", "updated", "9")  # damaged, and listed first
    assert [i.id for i in store.paused(["dev", "ops"], None)[0]] == ["c", "b", "a"]
    assert store.saved()[0] == SavedRow("a", "dev", rows[0], None)
    assert store.saved()[3] == SavedRow("d", "dev", None, "missing id")
    with pytest.raises(StoreError) as caught:
        store.instance("dev", "d")
    assert str(caught.value) == f"{store.name}: a saved instance can't be read (missing id)"


def test_instances_filters_and_held_by(istore: InstanceStore) -> None:
    store = istore
    rows = [
        inst("a", 1),
        inst("b", 2, status="interrupted"),
        inst("c", 3, status="paused", holder=None),
        inst("d", 4, machine="ops", holder="k2"),
        inst("e", 2, status="completed"),
    ]
    store.commit_instances([new(i) for i in rows])
    ids = lambda found: [i.id for i in found]  # noqa: E731
    assert ids(store.instances(None, None)) == ["d", "c", "b", "e", "a"]
    assert ids(store.instances(["dev"], None)) == ["c", "b", "e", "a"]
    assert ids(store.instances(["dev"], ["active", "paused"])) == ["c", "a"]
    assert ids(store.instances(None, ["active"])) == ["d", "a"]
    assert ids(store.instances([], None)) == []
    assert ids(store.instances(["ops", "dev"], ["active"])) == ["d", "a"]
    assert ids(store.instances(None, [])) == ["d", "c", "b", "e", "a"]
    assert ids(store.held_by("k")) == ["b", "a"]
    assert ids(store.held_by("k2")) == ["d"]
    store.commit_instances([new(inst("f", 2))])
    assert ids(store.held_by("k")) == ["b", "f", "a"]


# --- sessions ---------------------------------------------------------------------------------


def test_bind_once_per_host_session(store: SqliteStore) -> None:
    audit = (AuditRecord(T0, "bind", {"harness": "claude"}),)
    first = store.bind(sess("k"), audit)
    assert first == sess("k")
    again = store.bind(sess("k2", host_session="h-k"), audit)
    assert again == sess("k")
    assert store.binding("claude", "h-k") == sess("k")
    assert store.binding("claude", "h-k2") is None and store.binding("other", "h-k") is None
    assert store.key_taken("k") and not store.key_taken("k2")
    assert store.audit("k") == list(audit) and store.audit("k2") == []


def test_sessions_order_and_audit(store: SqliteStore) -> None:
    for s in (sess("b", 1), sess("a", 1), sess("c", 2)):
        store.commit_session(SessionWrite(s, True, None, frozenset()), ())
    assert [s.key for s in store.sessions()] == ["c", "a", "b"]
    store.append_audit("a", (AuditRecord(T0, "x", {"n": 1}), AuditRecord(T0, "y", {})))
    store.append_audit("a", (AuditRecord(T.format(1), "z", {"s": "t"}),))
    assert store.audit("a") == [
        AuditRecord(T0, "x", {"n": 1}),
        AuditRecord(T0, "y", {}),
        AuditRecord(T.format(1), "z", {"s": "t"}),
    ]


def test_commit_session_merges_and_conflicts(store: SqliteStore) -> None:
    s = sess("k", blocks=2)
    created = store.commit_session(SessionWrite(s, True, None, frozenset()), ())
    assert created == s and store.session("k") == s
    held = s._replace(holding=Place("dev", "a"), blocks=0, last_active=T.format(5))
    audit = (AuditRecord(T0, "event", {"e": 1}),)
    merged = store.commit_session(
        SessionWrite(held, False, None, frozenset({"holding", "lastActive"})), audit
    )
    assert merged == s._replace(holding=Place("dev", "a"), last_active=T.format(5), version=2)
    assert store.session("k") == merged and store.audit("k") == list(audit)
    assert store.sessions() == [merged]
    with pytest.raises(StoreConflict):
        store.commit_session(SessionWrite(held, False, None, frozenset({"blocks"})), ())
    with pytest.raises(StoreConflict) as missing:
        store.commit_session(SessionWrite(sess("zz"), False, None, frozenset()), ())
    assert (missing.value.machine, missing.value.id, str(missing.value)) == (
        "",
        "zz",
        "/zz changed",
    )
    assert store.session("k") == merged


# --- user.py ----------------------------------------------------------------------------------


def test_the_user_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert state_home() == str(tmp_path / "state" / "smllm")
    user = user_store()
    assert user.path == str(tmp_path / "state" / "smllm" / "user.db")
    assert user.durable is False and user.gitignore is False
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_home() == str(tmp_path / "home" / ".local" / "state" / "smllm")
    monkeypatch.setenv("XDG_STATE_HOME", "")
    assert state_home() == str(tmp_path / "home" / ".local" / "state" / "smllm")
