"""Where a session is, in one line's worth of values: the status line (cli-and-harnesses.md §7).

Read-only, like a view (engine.md §4.4): a held instance that has left the session reads as
idle, and nothing is written.
"""

from __future__ import annotations

from ..recordclass import Record
from .held import kind_of, left_message
from .records import INTERRUPTED

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..machine.model import Loaded
    from ..machine.summary import Summary
    from .host import Reader
    from .records import Instance, Session

__all__ = ["Status", "status"]


class Status(Record):
    session: str
    held: Instance | None  # the instance the session is in, or None in idle
    kind: str | None  # its kind
    yielded: bool
    interrupted: Instance | None  # the slot's instance while it is still this session's
    interrupted_kind: str | None
    paused: int  # paused instances of the session's configured machines

    @property
    def visit(self) -> int | None:
        return self.held.visits.get(self.held.state, 1) if self.held is not None else None

    def to_json(self) -> dict[str, Any]:
        """Every key always present (§7)."""
        held = self.held
        return {
            "session": self.session,
            "idle": held is None,
            "machine": held.machine if held else None,
            "state": held.state if held else None,
            "visit": self.visit,
            "yielded": self.yielded if held else False,
            "instance": _instance_json(held, self.kind),
            "interrupted": _instance_json(self.interrupted, self.interrupted_kind),
            "paused": self.paused,
        }


def _instance_json(inst: Instance | None, kind: str | None) -> dict[str, Any] | None:
    if inst is None:
        return None
    return {
        "machine": inst.machine,
        "kind": kind,
        "id": inst.id,
        "ref": inst.ref,
        "label": inst.label,
        "status": inst.status,
    }


def status(loaded: Loaded | Summary, session: Session, reader: Reader) -> Status:
    held = None
    if session.holding is not None:
        inst = reader.instance(*session.holding)
        if left_message(loaded, session, inst, session.holding) is None:
            held = inst
    slot = None
    if session.interrupted is not None:
        found = reader.instance(*session.interrupted)
        if found is not None and found.status == INTERRUPTED and found.holder == session.key:
            slot = found
    _listed, paused = reader.paused(list(loaded.machines), 0)
    return Status(
        session.key,
        held,
        kind_of(loaded, held.machine) if held else None,
        session.yielded,
        slot,
        kind_of(loaded, slot.machine) if slot else None,
        paused,
    )
