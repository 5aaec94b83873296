"""A session's calls that need little of its machines: the session read with the advice an
unknown key gets, the call lock taken over it (engine.md §10), a user prompt's bookkeeping and
a yielded session's stop (engine.md §9). `App` uses the first three too. The hooks call these
without it, since they run on every user message and stop: clearing a yield needs only the
user store, the lock and the clock, and a yielded stop only the instance's holder.
"""

from __future__ import annotations

from ..errors import CallError, StoreConflict
from ..store.user import state_home
from .calllock import CallLock

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..engine.host import Host
    from ..engine.records import Session
    from ..store.base import SessionStore

__all__ = ["PASS_KEY", "locked", "prompt_submitted", "session_of", "stops_yielded"]

PASS_KEY = (
    "pass the session key from the latest <smllm> header, or fire enter without one "
    "to start a session"
)


def session_of(user: SessionStore, key: str) -> Session:
    s = user.session(key)
    if s is None:
        raise CallError(f"no session {key}; {PASS_KEY}")
    return s


def locked(user: SessionStore, key: str) -> tuple[Session, CallLock] | None:
    """The session as it is once this call holds its call lock (one call of a session at a
    time), and the lock to release; None while another call holds it. An unknown key is a
    CallError before any lock file is made."""
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


def stops_yielded(user: SessionStore, session: Session) -> bool:
    """Whether `session` stops freely because it has yielded and still holds its instance
    (engine.md §9: a yield allows the stop; an instance that left the session blocks it, with
    why). Only that case is decided here, by the engine's own rule (`left_message`), without
    the App, the events or the replies; False leaves every stop to `App.stop`. Nothing is
    written either way, so no call lock is taken."""
    if not session.yielded or session.holding is None:
        return False
    from ..engine.held import left_message
    from ..machine.configs.cache import load_cached
    from .stores import Stores

    loaded = load_cached(session.configs)
    inst = Stores(loaded, user).instance(*session.holding)
    return left_message(loaded, session, inst, session.holding) is None
