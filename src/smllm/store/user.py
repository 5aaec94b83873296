"""Where the user store lives (engine.md §10), in a module of its own: the hooks find a
session's binding with it and the SQLite store alone, before (or without) importing the API."""

from __future__ import annotations

import os

from .sqlite import SqliteStore

__all__ = ["state_home", "user_store"]


def state_home() -> str:
    """`$XDG_STATE_HOME/smllm`, by default `~/.local/state/smllm`."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "smllm")


def user_store() -> SqliteStore:
    """The user's store: sessions, bindings and audits (engine.md §10). It commits with
    `synchronous=NORMAL`: power loss may drop its last commits, which §7.1 repairs from the
    instance records, so an accepted event waits for one device flush (the instance store's)."""
    return SqliteStore(os.path.join(state_home(), "user.db"), durable=False)
