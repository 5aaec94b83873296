"""The team store: instances, the ref index and history on PostgreSQL (engine.md §10).

One database may hold many projects: every row carries its config's `namespace`, and the tables
live in a schema of their own (`smllm`) beside whatever else the database holds. Sessions,
bindings and audit stay in the user's local store; holders and takeovers work through the
shared instance rows.

How §10's guarantees are kept, with PostgreSQL's own means:

- atomic: each commit is one transaction;
- no lost update: the `UPDATE` carries `WHERE version = v`; under READ COMMITTED a concurrent
  writer of the same row waits for the first one and then finds the version moved, so exactly
  one wins;
- unique refs: a unique index on (namespace, machine, ref), and the primary key (namespace, id);
- crash-safe: `synchronous_commit = on` for every connection, whatever the server's default;
- readers never wait (MVCC); a writer waits at most 5 s for a row lock (`lock_timeout`).

psycopg is imported when a store is first used, so a hook of a PostgreSQL project pays for it
only when it must read an instance, and a stop asks the store's broker instead where one runs
(store/brokered.py, store/broker.py). Messages never carry the password: the store is named by
its host, and any text from libpq is scrubbed of the URL's secrets.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from urllib.parse import unquote, urlsplit

from ..engine.records import HistoryRecord, Instance, InstanceWrite
from ..errors import RefTaken, StoreBusy, StoreConflict, StoreError, StoreTooNew
from ..jsontext import dumps as _dumps
from ..jsontext import loads as _json_loads
from .base import SavedRow, StoreDump, first_instance, paused_found, readable, saved_rows

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, TypeVar

    import psycopg

    T = TypeVar("T")

__all__ = ["SCHEMA_VERSION", "PostgresStore", "describe_url", "scrub"]

SCHEMA_VERSION = 1

#: engine.md §10: a writer waits at most 5 s for a lock.
LOCK_TIMEOUT_MS = 5000
#: how long to wait for a server that doesn't answer (libpq's minimum is 2 s)
CONNECT_TIMEOUT_SECS = 5
#: a link cut under an open connection: the kernel gives up on unacknowledged data after this
#: long, instead of retransmitting for a quarter of an hour
TCP_USER_TIMEOUT_MS = 10000


def session_settings() -> list[str]:
    """Every connection's settings (engine.md §10), as libpq `options`."""
    return [
        # a returned commit is on disk, whatever the server's default
        "-c synchronous_commit=on",
        # a writer waits at most 5 s for a row another writer holds, then the store is busy
        f"-c lock_timeout={LOCK_TIMEOUT_MS}",
        # a client that vanished inside a transaction (its host gone, no FIN) must not keep
        # its rows locked for the kernel's two hours of keepalive: the server gives up on it
        # after about 20 s of silence, and on any transaction left idle for a minute
        "-c tcp_keepalives_idle=5",
        "-c tcp_keepalives_interval=5",
        "-c tcp_keepalives_count=3",
        f"-c tcp_user_timeout={TCP_USER_TIMEOUT_MS}",
        "-c idle_in_transaction_session_timeout=60000",
    ]


#: an advisory lock key, so that concurrent first uses create the schema once
_SCHEMA_LOCK = 0x736D6C6C6D  # "smllm"

#: version → the statements that bring the schema from the previous version to it. Text
#: columns sort bytewise (COLLATE "C"), as SQLite's do, so listings agree on both backends.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE smllm.instances (
             namespace TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,
             machine TEXT COLLATE "C" NOT NULL, ref TEXT COLLATE "C",
             status TEXT COLLATE "C" NOT NULL, holder TEXT COLLATE "C",
             updated TEXT COLLATE "C" NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL,
             PRIMARY KEY (namespace, id))""",
        """CREATE UNIQUE INDEX instances_ref ON smllm.instances (namespace, machine, ref)
             WHERE ref IS NOT NULL""",
        "CREATE INDEX instances_status ON smllm.instances (namespace, status, machine, updated)",
        "CREATE INDEX instances_holder ON smllm.instances (namespace, holder)",
        """CREATE TABLE smllm.history (
             seq BIGSERIAL PRIMARY KEY, namespace TEXT COLLATE "C" NOT NULL,
             instance TEXT COLLATE "C" NOT NULL, data TEXT NOT NULL)""",
        "CREATE INDEX history_instance ON smllm.history (namespace, instance, seq)",
    ),
}


def describe_url(url: str) -> str:
    """The store as messages name it: its host and port, never its user or password."""
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname or _query_host(parts.query) or "localhost"
    except ValueError:
        return "the configured URL"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def _query_host(query: str) -> str | None:
    """`?host=/run/postgresql` (a Unix socket folder, or a host) of a URL without a netloc."""
    from urllib.parse import parse_qs

    hosts = parse_qs(query).get("host")
    return hosts[0] if hosts else None


def _secrets(url: str) -> list[str]:
    """The URL's password, raw and decoded, and the whole URL: what no message may show."""
    out = [url]
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if not password:
        # a URL too broken to parse: anything between the scheme's // and an @ is suspect
        m = re.match(r"[a-z]+://([^@/]*)@", url)
        password = m.group(1) if m else None
    if password:
        out += [password, unquote(password)]
    return sorted({s for s in out if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` (a message from libpq or psycopg) with the URL's secrets replaced by `***`."""
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def _reason(exc: BaseException, url: str) -> str:
    """libpq's message, shortened to its cause: one line, no 'connection failed' prefixes."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^connection (failed|is bad): ", "", text)
    text = re.sub(
        r'^connection to server (at|on socket) "[^"]*"( \([^)]*\))?(, port \d+)? failed: ', "", text
    )
    text = re.sub(r"^(FATAL|ERROR): +", "", text)
    return scrub(text.strip(), url)


class PostgresStore:
    """A namespace of a PostgreSQL database, as an InstanceStore."""

    def __init__(self, url: str, namespace: str = "default") -> None:
        self.url = url
        self.namespace = namespace
        self.host = describe_url(url)
        self.name = f"the store at {self.host} (namespace {namespace})"
        self._conn: psycopg.Connection[Any] | None = None
        self._schema_ready = False

    # -- connection ----------------------------------------------------------------------------

    def _open(self) -> psycopg.Connection[Any]:
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                "a PostgreSQL store needs psycopg: pip install 'smllm[postgres]'"
            ) from None
        options: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT_SECS,
            "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 2,
            "application_name": "smllm",
        }
        try:
            given = psycopg.conninfo.conninfo_to_dict(self.url)
        except psycopg.Error as exc:
            raise StoreError(f"the store URL is not valid: {_reason(exc, self.url)}") from None
        for key in list(options):
            if key in given:
                del options[key]  # the URL's own setting wins
        # the session's settings travel in the startup packet: no round trip of their own; the
        # URL's `options` come after ours, so a setting it names wins
        options["options"] = " ".join(
            [*session_settings(), str(given.get("options") or "")]
        ).strip()
        try:
            conn = psycopg.connect(self.url, autocommit=True, **options)
        except psycopg.OperationalError as exc:
            raise self._connect_error(exc) from None
        except psycopg.Error as exc:
            raise StoreError(f"{self.name} can't be opened: {_reason(exc, self.url)}") from None
        return conn

    def _connect_error(self, exc: BaseException) -> StoreError:
        reason = _reason(exc, self.url)
        if reason.startswith("invalid "):  # libpq's check of the URL's options
            return StoreError(f"the store URL is not valid: {reason}")
        refused = (
            "authentication failed",
            "does not exist",
            "no pg_hba.conf entry",
            "permission denied",
            "password",
        )
        if any(r in reason for r in refused):
            return StoreError(f"the store at {self.host} refused the connection: {reason}")
        return StoreError(f"the store at {self.host} is unreachable: {reason}")

    def _error(self, exc: BaseException) -> StoreError:
        """A psycopg error met while using an open connection, as smllm's."""
        import psycopg
        from psycopg import errors

        if isinstance(
            exc, (errors.LockNotAvailable, errors.TransactionRollback, errors.DeadlockDetected)
        ):
            return StoreBusy()  # waited its 5 s, or lost to a deadlock twice
        if isinstance(exc, errors.QueryCanceled):
            return StoreError(f"the store at {self.host} gave up: {_reason(exc, self.url)}")
        if isinstance(exc, psycopg.OperationalError):
            return StoreError(f"the store at {self.host} is unreachable: {_reason(exc, self.url)}")
        return StoreError(f"{self.name}: {_reason(exc, self.url)}")

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not None and (conn.closed or conn.broken):
            self.close()
            conn = None
        if conn is None:
            conn = self._conn = self._open()
        return conn

    def connection_fd(self) -> int | None:
        """The open connection's socket, or None: the broker watches it (store/broker.py)."""
        conn = self._conn
        return None if conn is None or conn.closed or conn.broken else conn.fileno()

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection mustn't fail
                self._conn.close()
            self._conn = None

    def _schema_version(self, conn: psycopg.Connection[Any]) -> int:
        """0 where smllm has no tables in this database yet."""
        if conn.execute("SELECT to_regclass('smllm.meta')").fetchone() == (None,):
            return 0
        row = conn.execute("SELECT value FROM smllm.meta WHERE key = 'schema'").fetchone()
        return int(row[0]) if row else 0

    def _ready(self, write: bool) -> bool:
        """Whether the schema is there (created or migrated first for a write); StoreTooNew for
        a newer one. Reads never write: a database without smllm's tables reads as empty."""
        if self._schema_ready:
            return True
        conn = self._connection()
        version = self._schema_version(conn)
        if version > SCHEMA_VERSION:
            raise StoreTooNew(self.name)
        if version < SCHEMA_VERSION:
            if not write:
                return False
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                conn.execute("CREATE SCHEMA IF NOT EXISTS smllm")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS smllm.meta (key TEXT PRIMARY KEY, value TEXT)"
                )
                version = self._schema_version(conn)  # another process may have migrated
                if version > SCHEMA_VERSION:
                    raise StoreTooNew(self.name)
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[target]:
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO smllm.meta VALUES ('schema', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )
        self._schema_ready = True
        return True

    def _run(self, write: bool, fn: Callable[[psycopg.Connection[Any]], T], empty: T) -> T:
        """`fn` on a ready connection, retried once on a fresh connection where the old one
        was found dead (a server restarted since this process last used it): nothing of a
        transaction a dead connection held was committed, so running it again is safe. So is
        running again one the server rolled back to break a deadlock (two calls writing two
        instances in opposite orders): the version checks then tell who lost."""
        import psycopg
        from psycopg import errors

        for attempt in (1, 2):
            try:
                if not self._ready(write):
                    return empty
                return fn(self._connection())
            except (errors.TransactionRollback, errors.DeadlockDetected) as exc:
                # (psycopg's DeadlockDetected is no TransactionRollback, though 40P01 is one)
                if attempt == 1:
                    continue
                raise self._error(exc) from None
            except psycopg.OperationalError as exc:
                dead = self._conn is None or self._conn.broken or self._conn.closed
                if attempt == 1 and dead:
                    self.close()
                    continue
                raise self._error(exc) from None
            except psycopg.Error as exc:
                raise self._error(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        def query(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(sql, args).fetchall()

        return self._run(False, query, [])

    # -- instances -----------------------------------------------------------------------------

    def instance(self, machine: str, id: str) -> Instance | None:
        return first_instance(self.name, self.instance_rows(machine, id))

    def instance_rows(self, machine: str, id: str) -> list[Any]:
        """The (data,) row of an instance, as stored: what the broker sends (store/broker.py)."""
        return self._read(
            "SELECT data FROM smllm.instances WHERE namespace = %s AND id = %s AND machine = %s",
            (self.namespace, id, machine),
        )

    def find(self, machine: str, id_or_ref: str) -> Instance | None:
        found = self.instance(machine, id_or_ref)
        if found is not None:
            return found
        return first_instance(
            self.name,
            self._read(
                "SELECT data FROM smllm.instances WHERE namespace = %s AND machine = %s "
                "AND ref = %s",
                (self.namespace, machine, id_or_ref),
            ),
        )

    def taken(self, machine: str, value: str) -> bool:
        return bool(
            self._read(
                "SELECT 1 FROM smllm.instances WHERE namespace = %s "
                "AND (id = %s OR (machine = %s AND ref = %s))",
                (self.namespace, value, machine, value),
            )
        )

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]:
        return paused_found(*self.paused_rows(machines, limit))

    def paused_rows(self, machines: Sequence[str], limit: int | None) -> tuple[list[Any], int]:
        """The (data,) rows of `paused`, as stored, and how many there are in all."""
        if not machines:
            return [], 0
        where = "namespace = %s AND status = 'paused' AND machine = ANY(%s)"
        args: list[Any] = [self.namespace, list(machines)]
        total = self._read(f"SELECT count(*) FROM smllm.instances WHERE {where}", args)
        sql = (
            f"SELECT data FROM smllm.instances WHERE {where} "
            "ORDER BY updated DESC, machine, coalesce(ref, id)"
        )
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        return self._read(sql, args), int(total[0][0]) if total else 0

    def instances(
        self, machines: Sequence[str] | None, statuses: Sequence[str] | None
    ) -> list[Instance]:
        clauses: list[str] = ["namespace = %s"]
        args: list[Any] = [self.namespace]
        if machines is not None:
            clauses.append("machine = ANY(%s)")
            args.append(list(machines))
        if statuses:
            clauses.append("status = ANY(%s)")
            args.append(list(statuses))
        rows = self._read(
            f"SELECT data FROM smllm.instances WHERE {' AND '.join(clauses)} ORDER BY updated DESC",
            args,
        )
        return readable(rows)

    def held_by(self, key: str) -> list[Instance]:
        rows = self._read(
            "SELECT data FROM smllm.instances WHERE namespace = %s AND holder = %s "
            "AND status IN ('active', 'interrupted') ORDER BY updated DESC, id",
            (self.namespace, key),
        )
        return readable(rows)

    def saved(self) -> list[SavedRow]:
        return saved_rows(
            self._read(
                "SELECT id, machine, data FROM smllm.instances WHERE namespace = %s ORDER BY id",
                (self.namespace,),
            )
        )

    def dump(self) -> StoreDump:
        def read(conn: psycopg.Connection[Any]) -> StoreDump:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                instances = conn.execute(
                    "SELECT id, machine, ref, status, updated, version, data "
                    "FROM smllm.instances WHERE namespace = %s ORDER BY id",
                    (self.namespace,),
                ).fetchall()
                history = conn.execute(
                    "SELECT instance, data FROM smllm.history WHERE namespace = %s ORDER BY seq",
                    (self.namespace,),
                ).fetchall()
            return StoreDump(tuple(instances), tuple(history))

        return self._run(False, read, StoreDump((), ()))

    def load(self, dump: StoreDump, unchanged: Callable[[], bool]) -> None:
        self._run(True, lambda conn: self._load(conn, dump, unchanged), None)

    def _load(
        self, conn: psycopg.Connection[Any], dump: StoreDump, unchanged: Callable[[], bool]
    ) -> None:
        from psycopg import errors

        ns = self.namespace
        with conn.transaction():
            for id, machine, ref, status, updated, version, data in dump.instances:
                try:
                    with conn.transaction():  # a savepoint: the error names this row
                        conn.execute(
                            "INSERT INTO smllm.instances (namespace, id, machine, ref, status, "
                            "holder, updated, version, data) VALUES (%s, %s, %s, %s, %s, %s, "
                            "%s, %s, %s)",
                            (ns, id, machine, ref, status, _holder(data), updated, version, data),
                        )
                except errors.UniqueViolation:
                    raise RefTaken(machine, ref or id) from None
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO smllm.history (namespace, instance, data) VALUES (%s, %s, %s)",
                    [(ns, instance, data) for instance, data in dump.history],
                )
            if not unchanged():
                raise StoreConflict("", "")

    def discard(self, dump: StoreDump) -> bool:
        def apply(conn: psycopg.Connection[Any]) -> bool:
            ns = (self.namespace,)
            with conn.transaction():
                # the rows are locked first, so no fire can land between the check and delete
                now = conn.execute(
                    "SELECT id, version FROM smllm.instances WHERE namespace = %s ORDER BY id "
                    "FOR UPDATE",
                    ns,
                ).fetchall()
                row = conn.execute(
                    "SELECT count(*) FROM smllm.history WHERE namespace = %s", ns
                ).fetchone()
                if now != [(r[0], r[5]) for r in dump.instances] or (
                    row is None or row[0] != len(dump.history)
                ):
                    return False
                conn.execute("DELETE FROM smllm.history WHERE namespace = %s", ns)
                conn.execute("DELETE FROM smllm.instances WHERE namespace = %s", ns)
            return True

        return self._run(True, apply, False)

    def history(self, machine: str, id: str) -> list[HistoryRecord]:
        rows = self._read(
            "SELECT data FROM smllm.history WHERE namespace = %s AND instance = %s ORDER BY seq",
            (self.namespace, id),
        )
        return [HistoryRecord.from_json(_json_loads(r[0])) for r in rows]

    def commit_instances(self, writes: Sequence[InstanceWrite]) -> None:
        rows = [(w, _dumps(w.instance.to_json()), _dumps(w.history.to_json())) for w in writes]
        self._run(True, lambda conn: self._commit(conn, rows), None)

    def _commit(
        self, conn: psycopg.Connection[Any], rows: list[tuple[InstanceWrite, str, str]]
    ) -> None:
        import psycopg
        from psycopg import errors

        ns = self.namespace
        try:
            conn.execute("BEGIN")
            for w, data, history in rows:
                i = w.instance
                if w.expected == 0:
                    conn.execute(
                        "INSERT INTO smllm.instances (namespace, id, machine, ref, status, "
                        "holder, updated, version, data) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                        "%s, %s)",
                        (
                            ns,
                            i.id,
                            i.machine,
                            i.ref,
                            i.status,
                            i.holder,
                            i.updated,
                            i.version,
                            data,
                        ),
                    )
                else:
                    cur = conn.execute(
                        "UPDATE smllm.instances SET ref = %s, status = %s, holder = %s, "
                        "updated = %s, version = %s, data = %s "
                        "WHERE namespace = %s AND id = %s AND version = %s",
                        (
                            i.ref,
                            i.status,
                            i.holder,
                            i.updated,
                            i.version,
                            data,
                            ns,
                            i.id,
                            w.expected,
                        ),
                    )
                    if cur.rowcount != 1:
                        raise StoreConflict(i.machine, i.id)
                conn.execute(
                    "INSERT INTO smllm.history (namespace, instance, data) VALUES (%s, %s, %s)",
                    (ns, i.id, history),
                )
        except errors.UniqueViolation:
            self._rollback(conn)
            raise RefTaken(i.machine, i.ref or i.id) from None
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.OperationalError as exc:
            # the connection died with the COMMIT sent: the server may have committed it
            self.close()
            if not self._committed(rows):
                raise StoreError(
                    f"the store at {self.host} dropped the connection during a commit, which "
                    f"was not saved: {_reason(exc, self.url)}"
                ) from None

    @staticmethod
    def _rollback(conn: psycopg.Connection[Any]) -> None:
        with contextlib.suppress(Exception):  # a dead connection rolls back on the server
            if not (conn.closed or conn.broken):
                conn.execute("ROLLBACK")

    def _committed(self, rows: list[tuple[InstanceWrite, str, str]]) -> bool:
        """After a lost COMMIT: whether its first write is what the store now holds (each
        record carries its new version and time, so an equal row is this commit's)."""
        w, data, _ = rows[0]
        try:
            conn = self._connection()
            found = conn.execute(
                "SELECT data FROM smllm.instances WHERE namespace = %s AND id = %s",
                (self.namespace, w.instance.id),
            ).fetchone()
        except Exception:  # still unreachable: the outcome stays unknown
            self.close()
            raise StoreError(
                f"the store at {self.host} dropped the connection during a commit, and can't "
                "be asked whether it was saved; check with smllm instance show"
            ) from None
        return found is not None and found[0] == data


def _holder(data: str) -> str | None:
    """The holder column of a copied record; None where the record can't be read."""
    try:
        found = _json_loads(data).get("holder")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None
