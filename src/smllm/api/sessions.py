"""A session's calls that need little of its machines: the session read with the advice an
unknown key gets, the call lock taken over it (engine.md §10), a user prompt's bookkeeping, a
yielded session's stop (engine.md §9) and the status line's values. `App` uses all but the stop.
The hooks and the status line call these without it, since they run on every user message, stop
and redraw: clearing a yield needs only the user store, the lock and the clock; a yielded stop
and a status only the instances and the machines' summary (machine/summary.py).
"""

from __future__ import annotations

from ..errors import CallError, StoreConflict
from ..store.user import state_home

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..engine.host import Host
    from ..engine.records import Session
    from ..engine.status import Status
    from ..machine.summary import StoreSpec
    from ..store.base import InstanceStore, SessionStore
    from .calllock import CallLock

__all__ = [
    "PASS_KEY",
    "echoed",
    "locked",
    "prompt_submitted",
    "session_of",
    "status_of",
]

PASS_KEY = (
    "pass the session key from the latest <smllm> header, or fire enter without one "
    "to start a session"
)


def echoed(value: str) -> str:
    """A caller's value (a session key, an event name) as an error outside a block echoes it:
    cut to 200 characters and escaped as in a block (agent-text.md §9)."""
    from ..engine.rules import echo
    from ..text.escape import escape

    return escape(echo(value))


def repeated_key(param: str, key: str) -> str:
    """The call error for a param whose JSON value repeats an object key (jsontext's
    repeat_inside): refused, as `--param NAME=JSON` refuses it."""
    return (
        f"params must be a JSON object: param {echoed(param)} repeats the key "
        f'"{echoed(key)}" in its value'
    )


def session_of(user: SessionStore, key: str) -> Session:
    s = user.session(key)
    if s is None:
        raise CallError(f"no session {echoed(key)}; {PASS_KEY}")
    return s


def locked(user: SessionStore, key: str) -> tuple[Session, CallLock] | None:
    """The session as it is once this call holds its call lock (one call of a session at a
    time), and the lock to release; None while another call holds it. An unknown key is a
    CallError before any lock file is made."""
    from .calllock import CallLock  # not read by a status line or a yielded stop

    session_of(user, key)
    lock = CallLock(state_home(), key)
    if not lock.acquire():
        return None
    return session_of(user, key), lock


def prompt_submitted(user: SessionStore, host: Host, key: str, prompt: str | None = None) -> None:
    """A user prompt clears `yielded` and `blocks` (engine.md §9), unless `prompt` is the
    text of the session's last block (a harness going on after it). While another call of
    the session runs, nothing is written (that call's accepted event clears them)."""
    from ..engine.prompt import prompt_submitted as bookkeeping

    held = locked(user, key)
    if held is None:
        return
    s, lock = held
    try:
        write, audit = bookkeeping(s, host, prompt)
        if write is not None:
            try:  # noqa: SIM105 - contextlib would cost an import on the hook path
                user.commit_session(write, audit)
            except StoreConflict:  # only a writer without the lock: the next prompt decides
                pass
    finally:
        lock.release()


def status_of(
    user: SessionStore, session: Session, opened: dict[StoreSpec, InstanceStore] | None = None
) -> Status:
    """The status line's values for `session` (cli-and-harnesses.md §7), read-only, on the
    machines' summary. A session that a cut-off call left behind its instance shows holding
    it again (engine.md §10), as a view does (the clock recovery reads dates a write that a
    status never makes)."""
    from ..engine.status import status
    from ..machine.configs.cache import summary_cached
    from .stores import Stores

    summary = summary_cached(session.configs)
    stores = Stores(summary, user, opened)
    if session.holding is None:
        from ..engine.recover import recovery

        found = recovery(summary, session, stores.held_by(session.key), _now)
        if found is not None:
            session = found[0].session
    return status(summary, session, stores)


def _now() -> str:
    from ..clock import utc_now
    from ..engine.records import iso

    return iso(utc_now())
