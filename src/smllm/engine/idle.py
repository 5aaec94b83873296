"""The idle list and idle's events (agent-text.md §3, §4; engine.md §5.0)."""

from __future__ import annotations

from .held import kind_of
from .records import INTERRUPTED
from .reply import EventItem, EventsList, IdleList, InstanceLine, MachineLine, ParamLine
from .rules import BUILTIN_DESCRIPTIONS

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..machine.model import Loaded
    from .host import Host, Reader
    from .records import Instance, Session

__all__ = [
    "PAUSED_LIST_CUT",
    "IdleView",
    "idle_prompt",
    "idle_view",
    "instance_line",
    "sort_paused",
]

#: agent-text.md §3: the idle list shows at most this many paused instances.
PAUSED_LIST_CUT = 10

_STATE_MACHINE_DESC = "The state machine to enter."
_REF_DESC = (
    "The id param that the list of state machines names for the machine: an existing "
    "id or ref continues that instance, and a new ref starts one with it. Omit it to "
    "start a new instance."
)
_STATE_DESC = (
    "An entry point to enter instead, or any state for an instance whose saved state "
    "no longer exists. Omit it to enter a new instance at the initial state, or an "
    "existing one at its saved state."
)


def instance_line(loaded: Loaded, inst: Instance) -> InstanceLine:
    return InstanceLine(kind_of(loaded, inst.machine), inst.label, inst.machine, inst.state)


def sort_paused(instances: list[Instance]) -> None:
    """engine.md §5.3's order, in place: most recently updated first; ties by machine id,
    then label, by code point (two stable sorts)."""
    instances.sort(key=lambda i: (i.machine, i.label))
    instances.sort(key=lambda i: i.updated, reverse=True)


def paused_after(
    loaded: Loaded, reader: Reader, written: Sequence[Instance], limit: int | None
) -> tuple[list[Instance], int]:
    """Paused instances of the configured machines as they will be once `written` commits."""
    machines = list(loaded.machines)
    mine = {i.id for i in written}
    fetch = None if limit is None else limit + len(mine) + 1
    stored, total = reader.paused(machines, fetch)
    if total > len(stored):
        # the fetch was cut: a written instance paused in the store may lie beyond it, counted
        # in `total` though this commit moves it on (e.g. completed at once by `always`)
        seen = {i.id for i in stored}
        for inst in written:
            if inst.id not in seen and inst.machine in loaded.machines:
                before = reader.instance(inst.machine, inst.id)
                if before is not None and before.status == "paused":
                    total -= 1
    listed = [i for i in stored if i.id not in mine]
    total -= len(stored) - len(listed)
    for inst in written:
        if inst.status == "paused" and inst.machine in loaded.machines:
            listed.append(inst)
            total += 1
    sort_paused(listed)
    return (listed if limit is None else listed[:limit]), total


class IdleView:
    """What idle shows a session: its list and its events."""

    def __init__(self, idle: IdleList, events: EventsList) -> None:
        self.idle = idle
        self.events = events


def _machine_lines(loaded: Loaded) -> tuple[MachineLine, ...]:
    return tuple(
        MachineLine(
            m.id,
            m.description,
            m.kind,
            m.ref.param,
            m.ref.pattern,
            m.ref.description,
            m.initial,
            tuple(m.entry_points()),
            m.host_only(),
        )
        for m in loaded.machines.values()
    )


def idle_events(
    loaded: Loaded, key: str | None, interrupted: Instance | None, has_slot: bool, paused_total: int
) -> EventsList:
    refs = list(dict.fromkeys(m.ref.param for m in loaded.machines.values()))
    params = [
        ParamLine(
            "stateMachine", True, tuple(loaded.machines) or None, description=_STATE_MACHINE_DESC
        )
    ]
    if refs:
        params.append(ParamLine(" | ".join(refs), False, description=_REF_DESC))
    params.append(ParamLine("state", False, description=_STATE_DESC))
    items = [EventItem("enter", BUILTIN_DESCRIPTIONS["enter"], tuple(params))]
    if has_slot:
        if interrupted is not None:
            kind = kind_of(loaded, interrupted.machine)
            desc = _resume_description(loaded, interrupted.machine).format(
                what=f"{kind} {interrupted.label}", state=interrupted.state
            )
        else:
            desc = "Go back to the instance that unmatched put aside."
        items.append(EventItem("resume", desc))
    if paused_total > PAUSED_LIST_CUT:
        items.append(
            EventItem("listPaused", BUILTIN_DESCRIPTIONS["listPaused"].format(count=paused_total))
        )
    return EventsList(key, tuple(items))


def _resume_description(loaded: Loaded, machine: str) -> str:
    m = loaded.machines.get(machine)
    if m is not None and "resume" in m.events and m.events["resume"].description is not None:
        return m.events["resume"].description
    return BUILTIN_DESCRIPTIONS["resume"]


def idle_view(
    loaded: Loaded,
    reader: Reader,
    session: Session | None,
    written: Sequence[Instance] = (),
    *,
    every_paused: bool = False,
    slot: Instance | None = None,
    slot_read: bool = False,
) -> IdleView:
    """The idle list of `session` as it will be after `written` commits.

    `slot`/`slot_read`: the interrupted slot's instance when the caller already knows it.
    """
    key = session.key if session is not None else None
    interrupted: Instance | None = None
    has_slot = session is not None and session.interrupted is not None
    if has_slot and session is not None and session.interrupted is not None:
        if slot_read:
            interrupted = slot
        else:
            interrupted = next((i for i in written if i.id == session.interrupted.id), None)
            if interrupted is None:
                interrupted = reader.instance(*session.interrupted)
    limit = None if every_paused else PAUSED_LIST_CUT
    paused, total = paused_after(loaded, reader, written, limit)
    shown_slot = (
        instance_line(loaded, interrupted)
        if interrupted is not None and interrupted.status == INTERRUPTED
        else None
    )
    idle = IdleList(
        machines=None if every_paused else _machine_lines(loaded),
        interrupted=None if every_paused else shown_slot,
        paused=tuple(instance_line(loaded, i) for i in paused),
        more=0 if every_paused else max(0, total - len(paused)),
    )
    # resume is offered only while the slot's instance is still this session's and
    # interrupted: the §5.2 clean-up cases (gone, taken over, no longer interrupted) would be
    # refused, and a view never offers what the data it read says will be refused
    live_slot = (
        interrupted is not None and interrupted.status == INTERRUPTED and interrupted.holder == key
    )
    events = idle_events(loaded, key, interrupted, live_slot, total)
    return IdleView(idle, events)


def idle_prompt(loaded: Loaded, host: Host) -> tuple[str | None, str | None]:
    """The config's `[idle] on-enter` text and any `Prompt failed` line."""
    idle = loaded.idle
    if idle is None:
        return None, None
    from ..machine.loader.actions import normalise_prompt
    from ..machine.model import Action
    from .steps import prompt_text

    text = normalise_prompt(idle.text) if idle.text is not None else None
    found, failure = prompt_text(
        host, Action("prompt", text=text, file=idle.file, file_shown=idle.shown)
    )
    return found or None, failure
