"""Whether a session still holds the instance it names (engine.md §7.1), and an instance's kind.

Apart from the idle view (engine/idle.py) because the cheap calls need only this: a yielded
session's stop (api/sessions.py) and the status line read no events, rules or replies.
"""

from __future__ import annotations

from .records import ACTIVE

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..machine.model import Loaded
    from ..machine.summary import Summary
    from .records import Instance, Place, Session

__all__ = ["kind_of", "left_message"]


def kind_of(loaded: Loaded | Summary, machine: str) -> str:
    m = loaded.machines.get(machine)
    return m.kind if m is not None else "instance"


def left_message(
    loaded: Loaded | Summary, session: Session, inst: Instance | None, place: Place
) -> str | None:
    """engine.md §7.1: why the held instance has left the session, or None."""
    if inst is None:
        return f"instance {place.id} no longer exists; you are in idle"
    kind = kind_of(loaded, inst.machine)
    if inst.holder is not None and inst.holder != session.key:
        return f"{kind} {inst.label} moved to session {inst.holder}; you are in idle"
    if inst.status != ACTIVE:
        return f"{kind} {inst.label} is {inst.status}; you are in idle"
    return None
