"""What a reply says, as data: `text/` turns it into the exact `<smllm>` block.

The engine decides every part and its content; it never formats a block or escapes a value.
"""

from __future__ import annotations

from ..recordclass import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "EventItem",
    "EventsList",
    "Header",
    "IdleList",
    "InstanceLine",
    "MachineLine",
    "ParamLine",
    "Reply",
]


class Header(Record):
    session: str | None  # None: "no session · idle"
    machine: str | None = None  # None: idle
    state: str = ""
    visit: int = 1
    kind: str = ""
    label: str = ""


class ParamLine(Record):
    name: str
    required: bool
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    json: bool = False
    schema: str | None = None
    description: str | None = None


class EventItem(Record):
    name: str
    description: str | None
    params: tuple[ParamLine, ...] = ()


class EventsList(Record):
    session: str | None
    items: tuple[EventItem, ...]


class MachineLine(Record):
    id: str
    description: str | None
    kind: str
    ref_param: str
    ref_pattern: str | None
    ref_description: str | None
    initial: str
    entry_points: tuple[str, ...]
    host_only: bool


class InstanceLine(Record):
    kind: str
    label: str
    machine: str
    state: str


class IdleList(Record):
    machines: tuple[MachineLine, ...] | None  # None: listPaused, which shows only Paused:
    interrupted: InstanceLine | None
    paused: tuple[InstanceLine, ...]
    more: int  # paused left out of the list


class Reply(Record):
    """The parts of one block, in block order; empty parts are left out."""

    header: Header
    arrived: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    trace: tuple[str, ...] = ()
    error: str | None = None
    instructions: tuple[str, ...] = ()
    yielded: str | None = None  # the state of "Yielded: staying in STATE. …"
    completed: str | None = None  # "KIND LABEL" of "Completed KIND LABEL. …"
    idle: IdleList | None = None
    events: EventsList | None = None
