"""Read-only views and the stop decision (engine.md §4.4, §9); the user-prompt bookkeeping is
engine/prompt.py."""

from __future__ import annotations

from ..recordclass import Record
from .held import left_message
from .idle import idle_prompt, idle_view
from .records import AuditRecord, SessionWrite, block_digest, iso
from .reply import Header, Reply
from .rules import gone_events, gone_note, not_configured, state_events, unconfigured_events
from .steps import entry_prompts

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final, Literal

    from ..machine.model import Loaded
    from .host import Host, Reader
    from .records import Instance, Session

    DecisionValue = Literal["allow", "block", "runaway"]


__all__ = ["ALLOW", "Decision", "StopOutcome", "stop", "view"]


def _idle_reply(
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


def _held(loaded: Loaded, reader: Reader, session: Session) -> tuple[str | None, Instance | None]:
    assert session.holding is not None
    inst = reader.instance(*session.holding)
    return left_message(loaded, session, inst, session.holding), inst


def _header(session: Session, inst: Instance, kind: str) -> Header:
    return Header(
        session.key, inst.machine, inst.state, inst.visits.get(inst.state, 1), kind, inst.label
    )


def view(loaded: Loaded, session: Session, reader: Reader, host: Host) -> Reply:
    """engine.md §4.4: where the session is, with its instructions and events. Writes nothing."""
    if session.holding is None:
        return _idle_reply(loaded, reader, host, session)
    left, inst = _held(loaded, reader, session)
    if left is not None:
        return _idle_reply(loaded, reader, host, session._replace(holding=None), left)
    assert inst is not None
    machine = loaded.machines.get(inst.machine)
    if machine is None:
        return Reply(
            _header(session, inst, "instance"),
            error=not_configured(inst.machine),
            events=unconfigured_events(session.key, inst),
        )
    state = machine.states.get(inst.state)
    if state is None:
        return Reply(
            _header(session, inst, machine.kind),
            notes=(gone_note(machine, inst),),
            events=gone_events(machine, inst, session.key),
        )
    prompts, failures = entry_prompts(machine, state, host)
    return Reply(
        _header(session, inst, machine.kind),
        trace=tuple(failures),
        instructions=tuple(prompts),
        events=state_events(machine, state, inst, session.key),
    )


class Decision:
    """What a stop hook does: an enum's values as strings (`enum` costs ~1 ms per hook call)."""

    #: let the stop through quietly
    ALLOW: Final = "allow"
    #: block the stop with the reply's text
    BLOCK: Final = "block"
    #: let it through, but write the block to stderr and audit `runaway`
    RUNAWAY: Final = "runaway"


class StopOutcome(Record):
    decision: DecisionValue
    reply: Reply | None
    session: SessionWrite | None = None
    audit: tuple[AuditRecord, ...] = ()
    #: the reply's text, when the stop rendered it for its digest (a block): the hook's reason
    text: str | None = None


ALLOW = StopOutcome(Decision.ALLOW, None)


def stop(
    loaded: Loaded,
    session: Session,
    continuing: bool | None,
    reader: Reader,
    host: Host,
    render: Callable[[Reply], str] | None = None,
) -> StopOutcome:
    """engine.md §9, rules 2 – 7 (rule 1, no session bound, is the hook's).

    `render` gives a reply's text as the hook passes it on (`text.block.render`, which the
    engine doesn't import): a block records its digest in the session, so that a harness that
    sends the block back as a prompt doesn't clear it (`prompt.prompt_submitted`). Without it the
    block records none."""
    if session.holding is None:
        return ALLOW
    at = iso(host.now())
    left, inst = _held(loaded, reader, session)
    if left is not None:
        new = session._replace(holding=None, version=session.version + 1, last_active=at)
        reply = _idle_reply(loaded, reader, host, new, left)
        new, changes, text = _digested(new, reply, render, {"holding", "lastActive"})
        sw = SessionWrite(new, False, session.holding, changes)
        return StopOutcome(
            Decision.BLOCK, reply, sw, (AuditRecord(at, "moved", {"message": left}),), text
        )
    assert inst is not None
    machine = loaded.machines.get(inst.machine)
    if machine is None or session.yielded:
        return ALLOW
    state = machine.states.get(inst.state)
    if state is None:
        reply = Reply(
            _header(session, inst, machine.kind),
            notes=(gone_note(machine, inst),),
            events=gone_events(machine, inst, session.key),
        )
    else:
        reply = Reply(
            _header(session, inst, machine.kind),
            events=state_events(machine, state, inst, session.key),
        )
    detail = {
        "machine": inst.machine,
        "state": inst.state,
        "kind": machine.kind,
        "label": inst.label,
    }
    if session.blocks >= 1 and (continuing is not False or session.blocks >= 2):
        return StopOutcome(Decision.RUNAWAY, reply, None, (AuditRecord(at, "runaway", detail),))
    new = session._replace(blocks=session.blocks + 1, version=session.version + 1, last_active=at)
    new, changes, text = _digested(new, reply, render, {"blocks", "lastActive"})
    sw = SessionWrite(new, False, session.holding, changes)
    return StopOutcome(Decision.BLOCK, reply, sw, (AuditRecord(at, "block", detail),), text)


def _digested(
    new: Session, reply: Reply, render: Callable[[Reply], str] | None, changes: set[str]
) -> tuple[Session, frozenset[str], str | None]:
    """`new` recording the digest of a block's text, the fields the write sets, and the text."""
    if render is None:
        return new, frozenset(changes), None
    text = render(reply)
    return new._replace(last_block=block_digest(text)), frozenset({*changes, "lastBlock"}), text
