"""`smllm mcp` (cli-and-harnesses.md §4): the CLI's side only; the server is smllm.mcp."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Callable

    from ..engine.records import Session
    from ..store.base import SessionStore

__all__ = ["mcp"]


def mcp(args: Namespace) -> int:
    from ..mcp.server import serve
    from .common import config_option

    return serve(config_option(args), _watch)


def _watch(user: SessionStore) -> Callable[[str | None, Session | None], str | None]:
    """harness/seen.py's watch over the client's hooks, from the server's start (less two
    minutes: a client runs its session-start hook as it starts the server)."""
    import os
    from datetime import timedelta

    from ..clock import utc_now
    from ..engine.records import iso
    from ..harness.seen import HooksWatch

    started = iso(utc_now() - timedelta(minutes=2))
    return HooksWatch(user, os.environ, started).note
