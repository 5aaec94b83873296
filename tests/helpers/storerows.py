"""Reading (and, for tests that damage records, writing) a project's instance store directly,
whichever backend its config names: the SQLite file in `.smllm/state`, or the rows of its
namespace in PostgreSQL. Tests assert the same things on both.

    rows = StoreRows.of(project, env)   # from .smllm/config.toml's [state]
    rows.instance_rows(ref="GH-1")      # decoded JSON documents, columns checked against them
    rows.history("i-…")                 # one instance's history, oldest first
    rows.integrity()                    # "ok", or what is wrong

SQLite is read with the `sqlite3` module; PostgreSQL with psycopg, as the test server's role,
every query filtered by the namespace. Nothing here goes through smllm.

`fresh_database`, `host` and `lock_row` serve the PostgreSQL tests: a new empty database, the
server as smllm's messages name it, a connection holding a namespace's instance rows locked.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["StoreRows"]

Rows = list[tuple[Any, ...]]

#: the PostgreSQL indexes smllm makes (store/postgres.py), each checked by amcheck
PG_INDEXES = (
    "smllm.instances_pkey",
    "smllm.instances_ref",
    "smllm.instances_status",
    "smllm.instances_holder",
    "smllm.history_pkey",
    "smllm.history_instance",
)


class StoreRows:
    """One project's instance store, read without smllm."""

    def __init__(self, path: Path | None, url: str | None, namespace: str) -> None:
        self.path = path
        self.url = url
        self.namespace = namespace
        self.backend = "sqlite" if path is not None else "postgres"

    @classmethod
    def of(cls, project: Path, env: Mapping[str, str] | None = None) -> StoreRows:
        """The store PROJECT's config names (a `[state]` with `url-env` or `url`: PostgreSQL,
        the variable read from ENV, else os.environ; otherwise SQLite in `.smllm/state`)."""
        config = tomllib.loads((project / ".smllm" / "config.toml").read_text())
        state: dict[str, Any] = config.get("state", {})
        if "url-env" in state or "url" in state:
            url = state.get("url") or (env if env is not None else os.environ)[state["url-env"]]
            return cls(None, url, state.get("namespace", "default"))
        folder = project / ".smllm" / state.get("dir", "state")
        return cls(folder / "smllm.db", None, "")

    # -- raw access ----------------------------------------------------------------------------

    def _sqlite(self, sql: str, args: tuple[Any, ...] = (), write: bool = False) -> Rows:
        assert self.path is not None
        conn = sqlite3.connect(self.path, timeout=5)
        try:
            rows = conn.execute(sql, args).fetchall()
            if write:
                conn.commit()
            return rows
        finally:
            conn.close()

    def _pg(self, sql: str, args: tuple[Any, ...] = ()) -> Rows:
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql, args)
            return cur.fetchall() if cur.description is not None else []

    def exists(self) -> bool:
        """Whether smllm made its tables (the SQLite file with its schema; PostgreSQL's
        `smllm` schema, shared by every namespace of the database)."""
        if self.path is not None:
            return self.path.exists() and self._sqlite("PRAGMA user_version")[0][0] >= 1
        return self._pg("SELECT to_regclass('smllm.meta') IS NOT NULL")[0][0] is True

    def schema_version(self) -> int:
        """The store's schema version; 0 where its tables aren't there (none half made)."""
        if self.path is not None:
            version: int = self._sqlite("PRAGMA user_version")[0][0]
            if version == 0:
                assert self._sqlite("SELECT name FROM sqlite_master WHERE type = 'table'") == []
            return version
        if self._pg("SELECT to_regclass('smllm.meta') IS NULL")[0][0]:
            assert self._pg("SELECT to_regclass('smllm.instances') IS NULL")[0][0]
            return 0
        rows = self._pg("SELECT value FROM smllm.meta WHERE key = 'schema'")
        return int(rows[0][0]) if rows else 0

    # -- instances and history -----------------------------------------------------------------

    def instance_rows(
        self, machine: str | None = None, ref: str | None = None, check: bool = True
    ) -> list[dict[str, Any]]:
        """The instance documents (filtered by MACHINE and REF), in id order; with CHECK, each
        row's columns must agree with its JSON document."""
        where, args = ["1 = 1"], []
        for column, value in (("machine", machine), ("ref", ref)):
            if value is not None:
                where.append(f"{column} = {{}}")
                args.append(value)
        sql = (
            f"SELECT id, machine, ref, status, version, data FROM {{}} WHERE {' AND '.join(where)}"
        )
        out = []
        for id_, machine_, ref_, status, version, data in self._instances(sql, tuple(args)):
            d: dict[str, Any] = json.loads(data)
            if check:
                got = (d["id"], d["machine"], d["ref"], d["status"], d["version"])
                assert got == (id_, machine_, ref_, status, version), d
            out.append(d)
        return out

    def _instances(self, sql: str, args: tuple[Any, ...]) -> Rows:
        """SQL with `{}` for the table and for each placeholder, run in this store's namespace."""
        if self.path is not None:
            n = sql.count("{}") - 1
            return self._sqlite(sql.format("instances", *["?"] * n) + " ORDER BY id", args)
        n = sql.count("{}") - 1
        text = sql.format("smllm.instances", *["%s"] * n) + " AND namespace = %s ORDER BY id"
        return self._pg(text, (*args, self.namespace))

    def count(self) -> int:
        """How many instance rows the store holds (0 before smllm made its tables)."""
        if not self.exists():
            return 0
        if self.path is not None:
            rows = self._sqlite("SELECT count(*) FROM instances")
        else:
            rows = self._pg(
                "SELECT count(*) FROM smllm.instances WHERE namespace = %s", (self.namespace,)
            )
        n: int = rows[0][0]
        return n

    def history(self, instance_id: str) -> list[dict[str, Any]]:
        """One instance's history records, oldest first."""
        if self.path is not None:
            rows = self._sqlite(
                "SELECT data FROM history WHERE instance = ? ORDER BY seq", (instance_id,)
            )
        else:
            rows = self._pg(
                "SELECT data FROM smllm.history WHERE namespace = %s AND instance = %s "
                "ORDER BY seq",
                (self.namespace, instance_id),
            )
        return [json.loads(r[0]) for r in rows]

    def all_history(self) -> list[tuple[str, dict[str, Any]]]:
        """Every history record as (instance id, record), in commit order."""
        if self.path is not None:
            rows = self._sqlite("SELECT instance, data FROM history ORDER BY seq")
        else:
            rows = self._pg(
                "SELECT instance, data FROM smllm.history WHERE namespace = %s ORDER BY seq",
                (self.namespace,),
            )
        return [(r[0], json.loads(r[1])) for r in rows]

    # -- soundness -----------------------------------------------------------------------------

    def integrity(self, cli: bool = True, superuser: Any = None) -> str:
        """ "ok" when the store is whole. SQLite: `PRAGMA integrity_check` through the module and
        (CLI) the sqlite3 shell. PostgreSQL: what the constraints promise, checked by queries
        (no duplicate id or (machine, ref), no history row without its instance, every
        document JSON); with SUPERUSER (a PgServer), amcheck verifies smllm's indexes against
        their tables as well."""
        if self.path is not None:
            return self._sqlite_integrity(cli)
        if not self.exists():
            return "ok"  # no table yet: nothing half made
        problems = []
        ns = (self.namespace,)
        if self._pg(
            "SELECT id FROM smllm.instances WHERE namespace = %s GROUP BY id HAVING count(*) > 1",
            ns,
        ):
            problems.append("duplicate ids")
        if self._pg(
            "SELECT machine, ref FROM smllm.instances WHERE namespace = %s AND ref IS NOT NULL "
            "GROUP BY machine, ref HAVING count(*) > 1",
            ns,
        ):
            problems.append("duplicate refs")
        if self._pg(
            "SELECT h.seq FROM smllm.history h LEFT JOIN smllm.instances i "
            "ON i.namespace = h.namespace AND i.id = h.instance "
            "WHERE h.namespace = %s AND i.id IS NULL",
            ns,
        ):
            problems.append("history without its instance")
        for (data,) in self._pg(
            "SELECT data FROM smllm.instances WHERE namespace = %s "
            "UNION ALL SELECT data FROM smllm.history WHERE namespace = %s",
            (self.namespace, self.namespace),
        ):
            try:
                json.loads(data)
            except ValueError:
                problems.append(f"not JSON: {data[:60]}")
        if superuser is not None:
            database = self.url.rsplit("/", 1)[1].split("?")[0] if self.url else "smllm"
            sql = "CREATE EXTENSION IF NOT EXISTS amcheck; " + " ".join(
                f"SELECT bt_index_check('{index}', true);" for index in PG_INDEXES
            )
            superuser.psql(sql, database=database)  # raises on a damaged index
        return "; ".join(problems) or "ok"

    def _sqlite_integrity(self, cli: bool) -> str:
        assert self.path is not None
        module = str(self._sqlite("PRAGMA integrity_check")[0][0])
        if module != "ok" or not cli:
            return module
        from conftest import require_tool

        proc = subprocess.run(
            [
                require_tool("sqlite3", "apt-get install sqlite3"),
                str(self.path),
                "PRAGMA integrity_check;",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    # -- damage, as a user editing the store would ---------------------------------------------

    def put(
        self,
        row_id: str,
        machine: str,
        data: str,
        status: str = "paused",
        updated: str = "2026-01-01T00:00:00.000000Z",
    ) -> None:
        """Write an instance row as given (no ref, version 1), replacing one of that id."""
        if self.path is not None:
            self._sqlite(
                "INSERT OR REPLACE INTO instances (id, machine, ref, status, updated, version, "
                "data) VALUES (?, ?, NULL, ?, ?, 1, ?)",
                (row_id, machine, status, updated, data),
                write=True,
            )
            return
        self._pg(
            "INSERT INTO smllm.instances (namespace, id, machine, ref, status, holder, updated, "
            "version, data) VALUES (%s, %s, %s, NULL, %s, NULL, %s, 1, %s) "
            "ON CONFLICT (namespace, id) DO UPDATE SET machine = excluded.machine, ref = NULL, "
            "status = excluded.status, holder = NULL, updated = excluded.updated, version = 1, "
            "data = excluded.data",
            (self.namespace, row_id, machine, status, updated, data),
        )

    def set(self, row_id: str, column: str, value: Any) -> None:
        """Set one column of an instance row (the JSON document `data`, or `updated` …)."""
        assert column in ("data", "updated", "status", "holder", "ref", "version")
        if self.path is not None:
            self._sqlite(
                f"UPDATE instances SET {column} = ? WHERE id = ?", (value, row_id), write=True
            )
        else:
            self._pg(
                f"UPDATE smllm.instances SET {column} = %s WHERE namespace = %s AND id = %s",
                (value, self.namespace, row_id),
            )


def fresh_database(server: Any) -> str:
    """A new, empty database of the test server (a PgServer), owned by the test role: where
    smllm must make its schema first. Its URL; the cluster's removal drops it."""
    import uuid

    name = "fresh_" + uuid.uuid4().hex[:12]
    server.psql(f"CREATE DATABASE {name} OWNER smllm")
    url: str = server.url(database=name)
    return url


def host(pg_server: Any) -> str:
    """The test server's host:port, as smllm names it in its messages."""
    return f"127.0.0.1:{pg_server.port}"


def lock_row(url: str, namespace: str) -> psycopg.Connection[Any]:
    """A connection holding the namespace's instance rows with SELECT … FOR UPDATE."""
    import psycopg

    conn = psycopg.connect(url)
    rows = conn.execute(
        "SELECT id FROM smllm.instances WHERE namespace = %s FOR UPDATE", (namespace,)
    ).fetchall()
    assert len(rows) == 1
    return conn
