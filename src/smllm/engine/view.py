"""Read-only views (engine.md §4.4); the stop decision is engine/stop.py, the user-prompt
bookkeeping engine/prompt.py."""

from __future__ import annotations

from .held import left_message
from .idle import idle_prompt, idle_view
from .reply import Header, Reply
from .rules import gone_events, gone_note, not_configured, state_events, unconfigured_events
from .steps import entry_prompts

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..machine.model import Loaded
    from .host import Host, Reader
    from .records import Instance, Session


__all__ = ["header_of", "held", "idle_reply", "view"]


def idle_reply(
    loaded: Loaded, reader: Reader, host: Host, session: Session | None, note: str | None = None
) -> Reply:
    v = idle_view(loaded, reader, session)
    text, failure = idle_prompt(loaded, host)
    return Reply(
        Header(session.key if session else None),
        notes=(note,) if note else (),
        trace=(failure,) if failure else (),
        instructions=(text,) if text else (),
        idle=v.idle,
        events=v.events,
    )


def held(loaded: Loaded, reader: Reader, session: Session) -> tuple[str | None, Instance | None]:
    """Why the instance the session names has left it (or None), and the instance."""
    assert session.holding is not None
    inst = reader.instance(*session.holding)
    return left_message(loaded, session, inst, session.holding), inst


def header_of(session: Session, inst: Instance, kind: str) -> Header:
    return Header(
        session.key, inst.machine, inst.state, inst.visits.get(inst.state, 1), kind, inst.label
    )


def view(loaded: Loaded, session: Session, reader: Reader, host: Host) -> Reply:
    """engine.md §4.4: where the session is, with its instructions and events. Writes nothing."""
    if session.holding is None:
        return idle_reply(loaded, reader, host, session)
    left, inst = held(loaded, reader, session)
    if left is not None:
        return idle_reply(loaded, reader, host, session._replace(holding=None), left)
    assert inst is not None
    machine = loaded.machines.get(inst.machine)
    if machine is None:
        return Reply(
            header_of(session, inst, "instance"),
            error=not_configured(inst.machine),
            events=unconfigured_events(session.key, inst),
        )
    state = machine.states.get(inst.state)
    if state is None:
        return Reply(
            header_of(session, inst, machine.kind),
            notes=(gone_note(machine, inst),),
            events=gone_events(machine, inst, session.key),
        )
    prompts, failures = entry_prompts(machine, state, host)
    return Reply(
        header_of(session, inst, machine.kind),
        trace=tuple(failures),
        instructions=tuple(prompts),
        events=state_events(machine, state, inst, session.key),
    )
