"""The SQLite store's parts that scripts/mutation found untested in-process (issue 12 §4):
what `smllm store migrate` moves (dump, load, discard), the connections a hot command keeps
open until its process ends, and the store's name in the error of a lookup by ref. SQLite
only, in-process (the migrate command's own tests run it as a process, against PostgreSQL too).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_mutants_store_sqlite import T0, inst, new

import smllm.store.sqlite as sqlite_store
from smllm.engine.records import HistoryRecord, InstanceWrite
from smllm.errors import RefTaken, StoreConflict, StoreError
from smllm.store.base import StoreDump
from smllm.store.sqlite import SqliteStore


def moved(i: object) -> InstanceWrite:
    """An update of `i` (version 1 → 2), with its history record."""
    assert isinstance(i, type(inst("x")))
    h = HistoryRecord(T0, "k", "agent", "go", {}, "PLAN", "WORK", "active", "active", 2, ())
    return InstanceWrite(i._replace(state="WORK", version=2), 1, h)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "from" / "smllm.db"))
    a, b = inst("a"), inst("b")._replace(ref=None)
    store.commit_instances([new(a), new(b)])
    store.commit_instances([moved(a)])
    yield store
    store.close()


def _rows(path: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        instances = conn.execute(
            "SELECT id, machine, ref, status, updated, version, data FROM instances ORDER BY id"
        ).fetchall()
        history = conn.execute("SELECT instance, data FROM history ORDER BY seq").fetchall()
    conn.close()
    return instances, history


def test_a_dump_is_every_row_as_stored(source: SqliteStore) -> None:
    dump = source.dump()
    instances, history = _rows(source.path)
    assert dump == StoreDump(tuple(instances), tuple(history))
    assert [(r[0], r[2], r[5]) for r in dump.instances] == [("a", "R-a", 2), ("b", None, 1)]
    assert [r[0] for r in dump.history] == ["a", "b", "a"]  # commit order
    assert all(isinstance(r, tuple) for r in (*dump.instances, *dump.history))


def test_a_store_never_made_dumps_empty_and_stays_unmade(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "none" / "smllm.db"))
    assert store.dump() == StoreDump((), ())
    assert not (tmp_path / "none").exists()


def test_a_dump_of_a_damaged_store_is_the_store_s_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    with pytest.raises(StoreError, match=f"^{path}: "):
        SqliteStore(str(path)).dump()


def test_a_load_writes_the_rows_as_they_were(source: SqliteStore, tmp_path: Path) -> None:
    dump = source.dump()
    target = SqliteStore(str(tmp_path / "to" / "smllm.db"))
    target.load(dump, lambda: True)
    assert _rows(target.path) == _rows(source.path)
    assert target.instance("dev", "a") == source.instance("dev", "a")
    assert target.dump() == dump
    target.close()


def test_a_load_refused_writes_nothing(source: SqliteStore, tmp_path: Path) -> None:
    dump = source.dump()
    target = SqliteStore(str(tmp_path / "to" / "smllm.db"))
    with pytest.raises(StoreConflict):  # the source changed meanwhile
        target.load(dump, lambda: False)
    assert target.dump() == StoreDump((), ())
    # a ref taken in the target: RefTaken names the machine and the ref, nothing written
    target.commit_instances([new(inst("c")._replace(ref="R-a"))])
    before = target.dump()
    with pytest.raises(RefTaken) as taken:
        target.load(dump, lambda: True)
    assert (taken.value.machine, taken.value.ref) == ("dev", "R-a")
    assert target.dump() == before
    target.close()


def test_a_load_of_an_instance_without_ref_names_its_id(
    source: SqliteStore, tmp_path: Path
) -> None:
    target = SqliteStore(str(tmp_path / "to" / "smllm.db"))
    target.commit_instances([new(inst("b"))])  # the id b is taken
    without_ref = StoreDump(tuple(r for r in source.dump().instances if r[0] == "b"), ())
    with pytest.raises(RefTaken) as taken:
        target.load(without_ref, lambda: True)
    assert (taken.value.machine, taken.value.ref) == ("dev", "b")
    target.close()


def test_a_discard_empties_the_store_only_as_dumped(source: SqliteStore) -> None:
    dump = source.dump()
    source.commit_instances([moved(inst("b")._replace(ref=None))])  # b moved on since
    assert source.discard(dump) is False
    assert source.dump() != StoreDump((), ())
    again = source.dump()
    source.commit_instances([new(inst("d"))])  # one more instance since
    assert source.discard(again) is False
    latest = source.dump()
    one_less = latest._replace(history=latest.history[1:])  # as many instances, fewer records
    assert source.discard(one_less) is False
    assert source.dump() == latest
    assert source.discard(latest) is True
    assert _rows(source.path) == ([], [])


def test_kept_connections_stay_open_after_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_open_until_exit: from then on, every connection opened is kept (and usable) after
    its store closes; a second call keeps the same list."""
    monkeypatch.setattr(sqlite_store, "_kept", None)
    sqlite_store.keep_open_until_exit()
    kept = sqlite_store._kept
    assert kept == []
    sqlite_store.keep_open_until_exit()
    assert sqlite_store._kept is kept
    store = SqliteStore(str(tmp_path / "s" / "smllm.db"))
    store.commit_instances([new(inst("a"))])
    conn = store._conn
    assert conn is not None and kept == [conn]
    store.close()
    assert store._conn is None
    assert conn.execute("SELECT id FROM instances").fetchall() == [("a",)]  # still open
    conn.close()


def test_a_damaged_instance_found_by_ref_names_the_store(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s" / "smllm.db"))
    store.commit_instances([new(inst("a"))])
    store.close()
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE instances SET data = '{' WHERE id = 'a'")
    conn.close()
    with pytest.raises(StoreError, match=f"^{store.path}: a saved instance can't be read"):
        store.find("dev", "R-a")


def test_a_dump_of_a_store_without_tables_is_the_store_s_error(tmp_path: Path) -> None:
    """SQLite's own words, after the store's path: a store file of this version whose tables
    are gone (an OperationalError), and one whose tables' pages are garbage."""
    path = tmp_path / "bare.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {sqlite_store.SCHEMA_VERSION}")
    conn.close()
    with pytest.raises(StoreError) as caught:
        SqliteStore(str(path)).dump()
    assert str(caught.value) == f"{path}: no such table: instances"
    store = SqliteStore(str(tmp_path / "s" / "smllm.db"))
    store.commit_instances([new(inst("a"))])
    store.close()
    data = bytearray(Path(store.path).read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)
    Path(store.path).write_bytes(bytes(data))
    with pytest.raises(StoreError) as caught:
        SqliteStore(store.path).dump()
    assert str(caught.value) == f"{store.path}: database disk image is malformed"
