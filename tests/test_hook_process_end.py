"""How a hot command's process ends (smllm.cli.main._exit_now, store.sqlite.keep_open_until_exit):
through os._exit, its SQLite connections left open, so that SQLite neither checkpoints nor
deletes the user store's -wal and -shm files, which the next hook would make again. What it
committed must be there for the next process all the same, and the store stay whole."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from pathlib import Path

from conftest import smllm
from helpers.hook_runs import hook, payload, start

from smllm.harness.hook import run_hook
from smllm.store import sqlite as sqlite_store


def _user_db(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"


def _blocks(db: Path, key: str) -> int:
    """The session's block count, read through SQLite (the WAL included), and the store checked
    whole on the way."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        [(data,)] = conn.execute("SELECT data FROM sessions WHERE key = ?", (key,)).fetchall()
    return int(json.loads(data)["blocks"])


def _held(project: Path, env: dict[str, str]) -> str:
    key = start("claude", "h1", project, env)
    args = ["fire", "--session", key, "enter", "--param", "stateMachine=dev"]
    assert smllm([*args, "--param", "issueId=GH-1"], project, env).code == 0
    return key


def test_a_hook_process_leaves_the_wal_for_the_next(project: Path, env: dict[str, str]) -> None:
    key = _held(project, env)
    db = _user_db(env)
    # `fire` is not a hot command: its process ends as Python does, closing the store's last
    # connection, and SQLite then checkpoints and removes the WAL
    assert not db.with_name("user.db-wal").exists()

    ran = hook("claude", "stop", payload("claude", "h1", project), project, env)
    assert ran.out.startswith('{"decision":"block"'), ran

    wal = db.with_name("user.db-wal")
    assert wal.exists() and wal.stat().st_size > 0  # the block's commit, not checkpointed
    assert db.with_name("user.db-shm").exists()
    assert _blocks(db, key) == 1  # committed: another connection reads it through the WAL
    # the next hook reads it too: the second stop in a row is a runaway
    ran = hook("claude", "stop", payload("claude", "h1", project, stop_hook_active=True),
               project, env)  # fmt: skip
    assert ran.out == "{}\n" and ran.err.startswith("<smllm>"), ran

    assert smllm(["session", "list"], project, env).code == 0  # closes: checkpoint, WAL gone
    assert not wal.exists()
    assert _blocks(db, key) == 1


def test_a_hook_run_in_process_closes_its_connections(project: Path, env: dict[str, str]) -> None:
    """Only a real process of a hot command keeps them: a caller in process (tests, the MCP
    server) gets every connection closed as before."""
    _held(project, env)
    assert sqlite_store._kept is None  # nothing in this process asked to keep them
    body = json.dumps(payload("claude", "h1", project)).encode()
    out, err = io.StringIO(), io.StringIO()
    assert run_hook("claude", "stop", stdin=body, stdout=out, stderr=err) == 0
    assert out.getvalue().startswith('{"decision":"block"'), err.getvalue()
    assert sqlite_store._kept is None
    # the hook's connections are closed: the last one checkpointed and removed the WAL
    assert not _user_db(env).with_name("user.db-wal").exists()
