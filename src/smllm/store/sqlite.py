"""The embedded store: SQLite in WAL mode (engine.md §10).

An instance store commits with `synchronous=FULL` (a returned commit survives power loss); the
user store with `synchronous=NORMAL` (it survives a process crash, but power loss may drop its
last commits, which §7.1 repairs from the instance records), so an accepted event costs one
device flush, not two.

Every read-then-write runs in one `BEGIN IMMEDIATE` transaction; reads never write and never
create the database. Records are JSON documents beside the columns that queries and unique
constraints need.
"""

from __future__ import annotations

import os

from ..engine.records import (
    AuditRecord,
    HistoryRecord,
    Instance,
    InstanceWrite,
    Session,
    SessionWrite,
)
from ..errors import RefTaken, StoreBusy, StoreConflict, StoreError, StoreTooNew
from ..jsontext import dumps as _dumps
from ..jsontext import loads as _json_loads
from .base import SavedRow, StoreDump, first_instance, paused_found, readable, saved_rows

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence
    from typing import Any
else:
    try:  # the C module alone: the `sqlite3` package also imports datetime (~2 ms of every
        # hook call) to register date adapters and converters that smllm never uses (it
        # stores text); the classes and `connect` are the same objects
        import _sqlite3 as sqlite3
    except ImportError:  # pragma: no cover - a Python without the split C module
        import sqlite3

__all__ = ["BUSY_TIMEOUT_SECS", "SCHEMA_VERSION", "SqliteStore", "keep_open_until_exit"]

#: engine.md §10: a writer waits at most 5 s for a lock.
BUSY_TIMEOUT_SECS = 5.0

SCHEMA_VERSION = 1

#: the connections of a process that ends through os._exit, kept from closing (see below)
_kept: list[sqlite3.Connection] | None = None


def keep_open_until_exit() -> None:
    """Leave every connection this process opens from now on open until it ends.

    For the hot commands, which end through os._exit (smllm.cli.main): closing a store's last
    connection makes SQLite checkpoint the WAL into the database (two syncs) and delete the
    -wal and -shm files, which the next hook then makes again, syncing the folder at its
    first commit: more than a tenth of a hook's time. Left open, the connections end with the
    process as after a crash, which WAL is made for: the next connection reads the WAL as it
    is, and checkpoints run as it fills (SQLite's 1,000 pages). What is committed is in the
    WAL file either way, and `PRAGMA synchronous` decides its syncs, as before."""
    global _kept
    if _kept is None:
        _kept = []


#: version → the statements that bring a store from the previous version to it.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE instances (
             id TEXT PRIMARY KEY, machine TEXT NOT NULL, ref TEXT, status TEXT NOT NULL,
             updated TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX instances_ref ON instances(machine, ref) WHERE ref IS NOT NULL",
        "CREATE INDEX instances_status ON instances(status, machine, updated)",
        """CREATE TABLE history (
             seq INTEGER PRIMARY KEY AUTOINCREMENT, instance TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE INDEX history_instance ON history(instance, seq)",
        """CREATE TABLE sessions (
             key TEXT PRIMARY KEY, last_active TEXT NOT NULL, data TEXT NOT NULL)""",
        """CREATE TABLE bindings (
             harness TEXT NOT NULL, host_session TEXT NOT NULL, key TEXT NOT NULL,
             PRIMARY KEY (harness, host_session))""",
        """CREATE TABLE audit (
             seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL, at TEXT NOT NULL,
             kind TEXT NOT NULL, data TEXT NOT NULL)""",
        "CREATE INDEX audit_session ON audit(session, seq)",
    ),
}


class SqliteStore:
    """One SQLite database file; serves as an InstanceStore and as a SessionStore.

    `durable` picks the commit's sync: True (instance stores) is `synchronous=FULL`, every
    commit flushed to the device; False (the user store) is `synchronous=NORMAL`, whose WAL
    commits are flushed only at checkpoints.
    """

    def __init__(self, path: str, gitignore: bool = False, *, durable: bool = True) -> None:
        self.path = path
        self.name = path
        self.gitignore = gitignore
        self.durable = durable
        self._conn: sqlite3.Connection | None = None

    # -- connection ----------------------------------------------------------------------------

    def _connect(self, write: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not os.path.exists(self.path):
            if not write:
                return None
            folder = os.path.dirname(self.path)
            if not os.path.isdir(folder):
                try:
                    os.makedirs(folder, exist_ok=True)
                    if self.gitignore:
                        with open(os.path.join(folder, ".gitignore"), "w") as f:
                            f.write("*\n")
                except OSError as exc:
                    # e.g. XDG_STATE_HOME names a file: the store can't be made there
                    raise StoreError(f"can't create {folder}: {exc.strerror}") from None
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_SECS, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECS * 1000)}")
            # a per-connection setting, so every connection sets it (engine.md §10)
            conn.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                conn.close()
                raise StoreTooNew(self.path)
            if version < SCHEMA_VERSION:
                if not write and version == 0:
                    # reads never write: a store a crash left without tables reads as empty
                    conn.close()
                    return None
                self._migrate(conn)
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        self._conn = conn
        if _kept is not None:
            _kept.append(conn)  # not closed when this store is, nor when it is freed
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        self._wal(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _wal(conn: sqlite3.Connection) -> None:
        """Switch a new store to WAL. The switch needs the database to itself, which the busy
        handler doesn't wait for: when several processes create the store at once, retry
        until one of them has switched it (WAL then stays on for every connection)."""
        import time

        deadline = time.monotonic() + BUSY_TIMEOUT_SECS
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError:
                mode = ""
            if str(mode).lower() == "wal" or time.monotonic() > deadline:
                return
            time.sleep(0.01)

    def _error(self, exc: sqlite3.OperationalError) -> StoreError:
        if "locked" in str(exc) or "busy" in str(exc):
            return StoreBusy()
        return StoreError(f"{self.path}: {exc}")

    def close(self) -> None:
        if self._conn is not None:
            if _kept is None:
                self._conn.close()
            self._conn = None

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        conn = self._connect(write=False)
        if conn is None:
            return []
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        except sqlite3.DatabaseError as exc:  # a damaged file
            raise StoreError(f"{self.path}: {exc}") from None

    def _write(self, fn: Any) -> Any:
        conn = self._connect(write=True)
        assert conn is not None
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        try:
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- instances -----------------------------------------------------------------------------

    def instance(self, machine: str, id: str) -> Instance | None:
        return first_instance(
            self.name,
            self._read("SELECT data FROM instances WHERE id = ? AND machine = ?", (id, machine)),
        )

    def find(self, machine: str, id_or_ref: str) -> Instance | None:
        found = self.instance(machine, id_or_ref)
        if found is not None:
            return found
        return first_instance(
            self.name,
            self._read(
                "SELECT data FROM instances WHERE machine = ? AND ref = ?", (machine, id_or_ref)
            ),
        )

    def taken(self, machine: str, value: str) -> bool:
        return bool(
            self._read(
                "SELECT 1 FROM instances WHERE id = ? OR (machine = ? AND ref = ?)",
                (value, machine, value),
            )
        )

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]:
        if not machines:
            return [], 0
        marks = ",".join("?" * len(machines))
        where = f"status = 'paused' AND machine IN ({marks})"
        total = self._read(f"SELECT count(*) FROM instances WHERE {where}", tuple(machines))
        sql = (
            f"SELECT data FROM instances WHERE {where} "
            "ORDER BY updated DESC, machine, coalesce(ref, id)"
        )
        args: tuple[Any, ...] = tuple(machines)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        rows = self._read(sql, args)
        return paused_found(rows, total[0][0] if total else 0)

    def instances(
        self, machines: Sequence[str] | None, statuses: Sequence[str] | None
    ) -> list[Instance]:
        clauses, args = [], []
        if machines is not None:
            clauses.append(f"machine IN ({','.join('?' * len(machines))})")
            args += list(machines)
        if statuses:
            clauses.append(f"status IN ({','.join('?' * len(statuses))})")
            args += list(statuses)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._read(f"SELECT data FROM instances{where} ORDER BY updated DESC", args)
        return readable(rows)

    def held_by(self, key: str) -> list[Instance]:
        rows = self._read(
            "SELECT data FROM instances WHERE status IN ('active', 'interrupted') "
            "AND json_extract(data, '$.holder') = ? ORDER BY updated DESC, id",
            (key,),
        )
        return readable(rows)

    def saved(self) -> list[SavedRow]:
        return saved_rows(self._read("SELECT id, machine, data FROM instances ORDER BY id"))

    def dump(self) -> StoreDump:
        conn = self._connect(write=False)
        if conn is None:
            return StoreDump((), ())
        try:
            conn.execute("BEGIN")  # one read snapshot for both tables
            try:
                instances = conn.execute(
                    "SELECT id, machine, ref, status, updated, version, data FROM instances "
                    "ORDER BY id"
                ).fetchall()
                history = conn.execute("SELECT instance, data FROM history ORDER BY seq").fetchall()
            finally:
                conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        return StoreDump(tuple(instances), tuple(history))

    def load(self, dump: StoreDump, unchanged: Callable[[], bool]) -> None:
        def apply(conn: sqlite3.Connection) -> None:
            for row in dump.instances:
                try:
                    conn.execute(
                        "INSERT INTO instances (id, machine, ref, status, updated, version, "
                        "data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        row,
                    )
                except sqlite3.IntegrityError:
                    raise RefTaken(row[1], row[2] or row[0]) from None
            conn.executemany("INSERT INTO history (instance, data) VALUES (?, ?)", dump.history)
            if not unchanged():
                raise StoreConflict("", "")

        self._write(apply)

    def discard(self, dump: StoreDump) -> bool:
        def apply(conn: sqlite3.Connection) -> bool:
            now = conn.execute("SELECT id, version FROM instances ORDER BY id").fetchall()
            count = conn.execute("SELECT count(*) FROM history").fetchone()[0]
            if now != [(r[0], r[5]) for r in dump.instances] or count != len(dump.history):
                return False
            conn.execute("DELETE FROM history")
            conn.execute("DELETE FROM instances")
            return True

        done: bool = self._write(apply)
        return done

    def history(self, machine: str, id: str) -> list[HistoryRecord]:
        rows = self._read("SELECT data FROM history WHERE instance = ? ORDER BY seq", (id,))
        return [HistoryRecord.from_json(_json_loads(r[0])) for r in rows]

    def commit_instances(self, writes: Sequence[InstanceWrite]) -> None:
        def apply(conn: sqlite3.Connection) -> None:
            for w in writes:
                i = w.instance
                data = _dumps(i.to_json())
                if w.expected == 0:
                    try:
                        conn.execute(
                            "INSERT INTO instances (id, machine, ref, status, updated, "
                            "version, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (i.id, i.machine, i.ref, i.status, i.updated, i.version, data),
                        )
                    except sqlite3.IntegrityError:
                        raise RefTaken(i.machine, i.ref or i.id) from None
                else:
                    try:
                        cur = conn.execute(
                            "UPDATE instances SET ref = ?, status = ?, updated = ?, version = ?, "
                            "data = ? WHERE id = ? AND version = ?",
                            (i.ref, i.status, i.updated, i.version, data, i.id, w.expected),
                        )
                    except sqlite3.IntegrityError:
                        raise RefTaken(i.machine, i.ref or i.id) from None
                    if cur.rowcount != 1:
                        raise StoreConflict(i.machine, i.id)
                conn.execute(
                    "INSERT INTO history (instance, data) VALUES (?, ?)",
                    (i.id, _dumps(w.history.to_json())),
                )

        self._write(apply)

    # -- sessions ------------------------------------------------------------------------------

    def session(self, key: str) -> Session | None:
        rows = self._read("SELECT data FROM sessions WHERE key = ?", (key,))
        return Session.from_json(_json_loads(rows[0][0])) if rows else None

    def key_taken(self, key: str) -> bool:
        return bool(self._read("SELECT 1 FROM sessions WHERE key = ?", (key,)))

    def binding(self, harness: str, host_session: str) -> Session | None:
        rows = self._read(
            "SELECT s.data FROM bindings b JOIN sessions s ON s.key = b.key "
            "WHERE b.harness = ? AND b.host_session = ?",
            (harness, host_session),
        )
        return Session.from_json(_json_loads(rows[0][0])) if rows else None

    def bind(self, session: Session, audit: Sequence[AuditRecord]) -> Session:
        def apply(conn: sqlite3.Connection) -> Session:
            rows = conn.execute(
                "SELECT s.data FROM bindings b JOIN sessions s ON s.key = b.key "
                "WHERE b.harness = ? AND b.host_session = ?",
                (session.harness, session.host_session),
            ).fetchall()
            if rows:
                return Session.from_json(_json_loads(rows[0][0]))
            self._insert_session(conn, session, audit)
            conn.execute(
                "INSERT OR REPLACE INTO bindings (harness, host_session, key) VALUES (?, ?, ?)",
                (session.harness, session.host_session, session.key),
            )
            return session

        result: Session = self._write(apply)
        return result

    def _insert_session(
        self, conn: sqlite3.Connection, session: Session, audit: Sequence[AuditRecord]
    ) -> None:
        conn.execute(
            "INSERT INTO sessions (key, last_active, data) VALUES (?, ?, ?)",
            (session.key, session.last_active, _dumps(session.to_json())),
        )
        self._audit(conn, session.key, audit)

    @staticmethod
    def _audit(conn: sqlite3.Connection, key: str, audit: Sequence[AuditRecord]) -> None:
        for a in audit:
            conn.execute(
                "INSERT INTO audit (session, at, kind, data) VALUES (?, ?, ?, ?)",
                (key, a.at, a.kind, _dumps(a.detail)),
            )

    def sessions(self) -> list[Session]:
        rows = self._read("SELECT data FROM sessions ORDER BY last_active DESC, key")
        return [Session.from_json(_json_loads(r[0])) for r in rows]

    def audit(self, key: str) -> list[AuditRecord]:
        rows = self._read("SELECT at, kind, data FROM audit WHERE session = ? ORDER BY seq", (key,))
        return [AuditRecord(r[0], r[1], _json_loads(r[2])) for r in rows]

    def append_audit(self, key: str, audit: Sequence[AuditRecord]) -> None:
        self._write(lambda conn: self._audit(conn, key, audit))

    def commit_session(self, write: SessionWrite, audit: Sequence[AuditRecord]) -> Session:
        def apply(conn: sqlite3.Connection) -> Session:
            new = write.session
            if write.create:
                self._insert_session(conn, new, audit)
                return new
            rows = conn.execute("SELECT data FROM sessions WHERE key = ?", (new.key,)).fetchall()
            if not rows:
                raise StoreConflict("", new.key)
            merged = write.merge(Session.from_json(_json_loads(rows[0][0])))
            conn.execute(
                "UPDATE sessions SET last_active = ?, data = ? WHERE key = ?",
                (merged.last_active, _dumps(merged.to_json()), merged.key),
            )
            self._audit(conn, merged.key, audit)
            return merged

        result: Session = self._write(apply)
        return result
