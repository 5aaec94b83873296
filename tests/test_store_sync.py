"""Each store's durability (engine.md §10): the user store (sessions, bindings, audit) commits
with WAL `synchronous=NORMAL`, an instance store with WAL `synchronous=FULL`, so an accepted
event waits for one device flush (the instance commit's), not two.

`PRAGMA synchronous` is a setting of a connection, not of the file, so these tests read it on the
live connections smllm itself opened, after a real call: the App's own, and fresh ones opened
through `smllm.api.stores` as any later process would.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from smllm.api.app import App
from smllm.api.stores import open_store, user_store
from smllm.machine.configs.cache import load_cached
from smllm.machine.configs.config import find_configs
from smllm.store.sqlite import SqliteStore

# PRAGMA synchronous's numbers
NORMAL = 1
FULL = 2

ENTER = (("stateMachine", "dev"), ("issueId", "GH-1"))


def _pragma(store: object, name: str) -> object:
    assert isinstance(store, SqliteStore)
    conn = store._conn
    assert isinstance(conn, sqlite3.Connection), "the store has no open connection"
    value: object = conn.execute(f"PRAGMA {name}").fetchone()[0]
    return value


def _accepted_fire(project: Path) -> App:
    """An App that has fired one accepted event (both stores written)."""
    app = App(cwd=str(project))
    result = app.fire(None, "enter", ENTER)
    assert result.ok and result.session is not None, result.text()
    assert app.fire(result.session.key, "yield").ok
    return app


def test_the_apps_own_connections(project: Path) -> None:
    app = _accepted_fire(project)
    assert _pragma(app.user, "synchronous") == NORMAL
    assert _pragma(app.user, "journal_mode") == "wal"
    assert len(app.opened) == 1
    (instances,) = app.opened.values()
    assert _pragma(instances, "synchronous") == FULL
    assert _pragma(instances, "journal_mode") == "wal"


def test_stores_opened_anew_after_a_call(project: Path) -> None:
    """A later process's connections: the same settings, for reads as for writes."""
    _accepted_fire(project).user.close()

    user = user_store()
    assert user.sessions()  # a read opens the connection
    assert _pragma(user, "synchronous") == NORMAL
    assert _pragma(user, "journal_mode") == "wal"
    user.close()

    spec = load_cached(find_configs(str(project), None)).stores["dev"]
    instances = open_store(spec)
    assert instances.instances(["dev"], None)  # a read opens the connection
    assert _pragma(instances, "synchronous") == FULL
    assert _pragma(instances, "journal_mode") == "wal"
    assert isinstance(instances, SqliteStore)
    instances.close()


def test_a_first_write_to_a_new_user_store(env: dict[str, str]) -> None:
    """The connection that creates the user store gets NORMAL too."""
    user = user_store()
    user.append_audit("sm-none", ())
    assert _pragma(user, "synchronous") == NORMAL
    assert _pragma(user, "journal_mode") == "wal"
    user.close()
