"""The stop decision (engine.md §9): what a stop hook answers when the agent ends its turn.

It is decided in three places, cheapest first, so that the hook path loads only what a stop
needs:

1. `harness/hook.py` (`_answer`): no session bound to the client's id, or a session in idle,
   lets the stop through without loading any config (rules 1 and 2);
2. `stops_yielded` here: a yielded session that still holds its instance stops freely
   (rule 4), decided on the machines' summary, without the events, the replies or the
   machines;
3. `stop` here, through `App.stop` (the call lock, the stores): every other stop, with the
   whole engine (rules 2 – 7: a left instance, a runaway, a block).
"""

from __future__ import annotations

from ..recordclass import Record
from .held import left_message
from .records import AuditRecord, SessionWrite, block_digest, iso

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final, Literal

    from ..machine.model import Loaded
    from ..machine.summary import Summary
    from .host import Host, Reader
    from .records import Session
    from .reply import Reply

    DecisionValue = Literal["allow", "block", "runaway"]

__all__ = ["ALLOW", "Decision", "StopOutcome", "stop", "stops_yielded"]


def stops_yielded(summary: Loaded | Summary, session: Session, reader: Reader) -> bool:
    """Whether `session` stops freely because it has yielded and still holds its instance
    (rule 4; an instance that left the session blocks the stop, with why). Only that case is
    decided here, by the engine's own rule (`left_message`), on the machines' summary. False
    leaves the stop to `stop`. Reads only."""
    if not session.yielded or session.holding is None:
        return False
    inst = reader.instance(*session.holding)
    return left_message(summary, session, inst, session.holding) is None


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
    from .reply import Reply  # the replies load only for a stop that may block
    from .rules import gone_events, gone_note, state_events
    from .view import header_of, held, idle_reply

    if session.holding is None:
        return ALLOW
    at = iso(host.now())
    left, inst = held(loaded, reader, session)
    if left is not None:
        new = session._replace(holding=None, version=session.version + 1, last_active=at)
        reply = idle_reply(loaded, reader, host, new, left)
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
            header_of(session, inst, machine.kind),
            notes=(gone_note(machine, inst),),
            events=gone_events(machine, inst, session.key),
        )
    else:
        reply = Reply(
            header_of(session, inst, machine.kind),
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
