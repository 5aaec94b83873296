"""`smllm statusline [--session KEY] [--json] [--color auto|always|never]` (cli-and-harnesses.md
§7), for Claude Code's `statusLine` command.

Without `--session` it reads Claude's status JSON on stdin and shows the session bound to its
`session_id`. Read-only and always exit 0: with nothing to show, or on any failure, it prints
nothing (`{}` with `--json`) and the reason on stderr, so a status line never shows an error.
"""

from __future__ import annotations

import os
import sys

from ..errors import SmllmError, internal_error
from .common import emit_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace

    from ..engine.status import Status

__all__ = ["STDIN_LIMIT", "STDIN_SECONDS", "statusline"]

#: Claude's status JSON is a few hundred bytes; past this, the input is not it
STDIN_LIMIT = 1 << 20
#: how long stdin may take to arrive and close: a status line must never hang on it
STDIN_SECONDS = 1.0


class _Nothing(Exception):
    """Nothing to show, and why (for stderr)."""


def _read_stdin() -> bytes | bytearray:
    """All of stdin, or _Nothing when there is none, it's too large, or it doesn't close
    within STDIN_SECONDS."""
    from ..harness.stdin import StdinTimeout, StdinTooLarge, read_bounded

    stream = sys.stdin
    if stream is None or stream.isatty():
        raise _Nothing("no status JSON on standard input (pass --session KEY)")
    try:
        return read_bounded(stream.fileno(), STDIN_LIMIT, STDIN_SECONDS)
    except StdinTimeout:
        raise _Nothing(f"standard input didn't close within {STDIN_SECONDS:g} s") from None
    except StdinTooLarge:
        raise _Nothing("standard input is larger than 1 MiB: not a status JSON") from None


def _session_id() -> str:
    from ..jsontext import loads

    try:
        data = loads(_read_stdin().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Nothing("standard input is not a JSON object") from None
    value = data.get("session_id") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise _Nothing("the status JSON has no session_id")
    return value


def _status(args: Namespace) -> Status:
    # not through the App: a status line reads the machines' summary alone (api/sessions.py)
    from ..api.sessions import session_of, status_of
    from ..api.stores import user_store

    user = user_store()
    key = args.session
    if key is None:
        host_session = _session_id()
        bound = user.binding("claude", host_session)
        if bound is None:
            raise _Nothing(f"no smllm session is bound to Claude session {host_session}")
        return status_of(user, bound)
    return status_of(user, session_of(user, key))


def _color(when: str) -> bool:
    if when == "auto":  # a status line is never a terminal: on unless NO_COLOR says no
        return not os.environ.get("NO_COLOR")
    return when == "always"


def statusline(args: Namespace) -> int:
    try:
        found = _status(args)
    except _Nothing as exc:  # nothing to show: advice, not an error
        reason = f"note: {exc}"
        found = None
    except SmllmError as exc:  # an unknown key, a store that can't be read
        reason = f"error: {exc}"
        found = None
    except Exception as exc:  # a status line shows nothing rather than fail
        reason = f"error: {internal_error(exc)}"
        found = None
    if found is None:
        sys.stderr.write(reason + "\n")
        if args.json:
            emit_json({})
        return 0
    if args.json:
        emit_json(found.to_json())
        return 0
    from ..text.statusline import render_status

    sys.stdout.write(render_status(found, _color(args.color)) + "\n")
    return 0
