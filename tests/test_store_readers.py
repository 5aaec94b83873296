"""engine.md §10, "readers don't wait for writers", on both backends: while another connection
holds a write open on the instance (an uncommitted UPDATE: SQLite's write lock, PostgreSQL's row
lock), `instance list`, `instance show` and a session's view answer with the committed record,
and a second writer waits at most its 5 s before `error: the store is busy` (exit 1)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import enter_args, smllm


@contextmanager
def open_write(project: Path, backend: str, env: dict[str, str], ns: str) -> Iterator[None]:
    """An uncommitted UPDATE of every instance row, held until the block ends."""
    if backend == "sqlite":
        conn: Any = sqlite3.connect(project / ".smllm" / "state" / "smllm.db", isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE instances SET updated = updated")
    else:
        import psycopg

        conn = psycopg.connect(env["SMLLM_TEST_PG"])
        conn.execute("UPDATE smllm.instances SET updated = updated WHERE namespace = %s", (ns,))
    try:
        yield
    finally:
        conn.rollback()
        conn.close()


def test_readers_do_not_wait_for_a_writer(
    store_project: Path, env: dict[str, str], backend: str, request: Any
) -> None:
    ns = request.getfixturevalue("pg_namespace") if backend == "postgres" else ""
    key = json.loads(smllm(["session", "new", "--json"], store_project, env).out)["session"]
    assert smllm(enter_args(key, "GH-5"), store_project, env).code == 0
    with open_write(store_project, backend, env, ns):
        took = []
        for args in (["instance", "list"], ["instance", "show", "GH-5"], ["session", "show", key]):
            start = time.monotonic()
            ran = smllm(args, store_project, env)
            took.append(time.monotonic() - start)
            assert ran.code == 0, ran.err
            assert "GH-5" in ran.out and "PLAN" in ran.out
        # a reader that waited would take the writer's whole 5 s lock wait, or forever
        assert max(took) < 4.5, f"a reader waited for the writer: {took}"
        start = time.monotonic()
        fired = smllm(["fire", "--session", key, "pause"], store_project, env)
        waited = time.monotonic() - start
    assert (fired.code, fired.out, fired.err) == (1, "", "error: the store is busy\n")
    assert 4.5 < waited < 15, waited
    # the writer gone, the same call goes through
    assert smllm(["fire", "--session", key, "pause"], store_project, env).code == 0
