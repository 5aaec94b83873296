"""The SQLite store's own behaviour, exactly (store/sqlite.py): a folder another process made
first, a store used from another thread, a read that takes no write lock, the errors of a path
SQLite can't open, a damaged page and a failed migration, the retries of the switch to WAL,
and the store's name in a saved instance's error. SQLite only (no PostgreSQL server); the
contract both backends keep: test_store_contract.py."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.store_records import inst, new

import smllm.store.sqlite as sqlite_store
from smllm.errors import StoreError
from smllm.store.sqlite import SqliteStore


def made(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(str(tmp_path / "s" / "store.db"))
    store.commit_instances([new(inst("a"))])
    store.close()
    return store


class LatePath:
    """os.path, but every folder seems not to exist yet."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os.path, name)

    @staticmethod
    def isdir(_path: str) -> bool:
        return False


class LateOs:
    path = LatePath()

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def test_a_folder_another_process_made_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "s").mkdir()
    # the folder appears between the check and the makedirs (two processes creating the store)
    monkeypatch.setattr(sqlite_store, "os", LateOs())
    store = SqliteStore(str(tmp_path / "s" / "store.db"))
    store.commit_instances([new(inst("a"))])
    monkeypatch.undo()
    assert SqliteStore(store.path).instance("dev", "a") == inst("a")


def test_a_store_serves_another_thread(tmp_path: Path) -> None:
    store = made(tmp_path)
    assert store.instance("dev", "a") == inst("a")  # connected in this thread
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(store.instance("dev", "a")))
    worker.start()
    worker.join()
    assert got == [inst("a")]


def test_a_read_takes_no_write_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = made(tmp_path)
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_SECS", 0.05)
    writer = sqlite3.connect(store.path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert SqliteStore(store.path).instance("dev", "a") == inst("a")
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_path_sqlite_cant_open(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    store = SqliteStore(str(tmp_path / "dir.db"))
    with pytest.raises(StoreError) as caught:
        store.instance("dev", "a")
    assert str(caught.value) == f"{store.path}: unable to open database file"


def test_a_damaged_page_is_the_store_s_error(tmp_path: Path) -> None:
    store = made(tmp_path)
    assert not os.path.exists(store.path + "-wal") or os.path.getsize(store.path + "-wal") == 0
    data = bytearray(Path(store.path).read_bytes())
    page = int.from_bytes(data[16:18], "big")
    assert len(data) > page  # the header page is kept; the tables' pages are garbage
    data[page:] = b"\xa5" * (len(data) - page)
    Path(store.path).write_bytes(bytes(data))
    with pytest.raises(StoreError) as caught:
        SqliteStore(store.path).instance("dev", "a")
    assert str(caught.value) == f"{store.path}: database disk image is malformed"


def test_a_failed_migration_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = (*sqlite_store._MIGRATIONS[1], "CREATE TABLE broken (")
    monkeypatch.setitem(sqlite_store._MIGRATIONS, 1, broken)
    store = SqliteStore(str(tmp_path / "s" / "store.db"))
    with pytest.raises(StoreError) as caught:
        store.commit_instances([new(inst("a"))])
    assert str(caught.value) == f"{store.path}: incomplete input"
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
        assert conn.in_transaction is False


class Switch:
    """A connection whose switch to WAL fails (busy, or another mode) until its last try."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.tries = 0

    def execute(self, sql: str) -> Any:
        assert sql.upper() == "PRAGMA JOURNAL_MODE = WAL"  # SQLite reads it in any case
        answer = self.answers[self.tries]
        self.tries += 1
        if answer is None:
            raise sqlite3.OperationalError("database is locked")
        return self

    def fetchone(self) -> tuple[str]:
        return (self.answers[self.tries - 1],)


def test_the_switch_to_wal_is_tried_again_until_it_holds() -> None:
    conn = Switch([None, "delete", "WAL"])
    SqliteStore._wal(conn)  # type: ignore[arg-type]
    assert conn.tries == 3


def test_the_store_names_itself_in_a_saved_instance_s_error(tmp_path: Path) -> None:
    store = made(tmp_path)
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE instances SET data = '{}'")
    again = SqliteStore(store.path)
    assert again.name == store.path
    with pytest.raises(StoreError) as caught:
        again.instance("dev", "a")
    assert str(caught.value).startswith(f"{store.path}: a saved instance can't be read (")


def test_the_switch_waits_10_ms_and_gives_up_only_past_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    slept: list[float] = []
    # the deadline is 0 + BUSY_TIMEOUT_SECS; the clock then reads exactly it, then past it
    clock = iter([0.0, 5.0, 5.0, 5.5])
    conn = Switch([None, "delete", "", "WAL"])
    with monkeypatch.context() as m:
        m.setattr(time, "monotonic", lambda: next(clock))
        m.setattr(time, "sleep", slept.append)
        SqliteStore._wal(conn)  # type: ignore[arg-type]
    assert conn.tries == 3  # at the deadline it tries again; past it, it stops (no "WAL")
    assert slept == [0.01, 0.01]
