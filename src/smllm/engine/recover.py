"""A session that an interrupted call left behind its instance (engine.md §10).

A call commits the instance first (the truth), then the session. A call killed between the two
commits (or a power loss, which the user store may lose its last commit to) leaves the instance
`active` or `interrupted` with the session as holder while the session rests in idle. That
instance is listed nowhere (not paused, not in the slot), so the session takes it back: a view
shows the session holding it, and the next call writes that first (audit `moved`).
"""

from __future__ import annotations

from .held import kind_of
from .records import ACTIVE, INTERRUPTED, AuditRecord, SessionWrite

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..machine.model import Loaded
    from ..machine.summary import Summary
    from .records import Instance, Session

__all__ = ["recovery"]


def recovery(
    loaded: Loaded | Summary, session: Session, held: Sequence[Instance], clock: Callable[[], str]
) -> tuple[SessionWrite, tuple[AuditRecord, ...]] | None:
    """The write that gives an idle `session` back what `held` (its instances by their
    `holder`, most recently updated first) says it holds; None when nothing disagrees.
    `clock` is read only for a write (one fire, one clock reading: engine.md §12)."""
    if session.holding is not None:
        return None
    active = next((i for i in held if i.status == ACTIVE and i.holder == session.key), None)
    slot = session.interrupted
    interrupted = None
    if slot is None:
        interrupted = next(
            (i for i in held if i.status == INTERRUPTED and i.holder == session.key), None
        )
    if active is None and interrupted is None:
        return None
    at = clock()
    changes = {"lastActive"}
    new = session._replace(version=session.version + 1, last_active=at)
    messages = []
    if active is not None:
        new = new._replace(holding=active.place)
        changes.add("holding")
        if slot == active.place:  # a resume that committed: the slot is empty now
            new = new._replace(interrupted=None)
            changes.add("interrupted")
        messages.append(f"{kind_of(loaded, active.machine)} {active.label} is held again")
    if interrupted is not None:
        new = new._replace(interrupted=interrupted.place)
        changes.add("interrupted")
        label = f"{kind_of(loaded, interrupted.machine)} {interrupted.label}"
        messages.append(f"{label} is interrupted again")
    message = "; ".join(messages) + ": a call ended between saving the instance and the session"
    audit = (AuditRecord(at, "moved", {"message": message}),)
    return SessionWrite(new, False, None, frozenset(changes)), audit
