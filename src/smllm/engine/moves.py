"""The two shapes of an accepted event (engine.md §4.3, §6): the instance arrives in a state
(an entry block, or completion and the idle list), or it is put aside (pause, or unmatched to
idle) and the session returns to idle. Both return the writes; nothing is committed here.
"""

from __future__ import annotations

from ..machine.model import Machine
from .call import Outcome
from .context import Ctx, audits, history, machine_header, session_write
from .idle import idle_prompt, idle_view
from .records import ACTIVE, COMPLETED, INTERRUPTED, PAUSED, Instance, InstanceWrite, Place
from .reply import Header, Reply
from .steps import Run

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["arrive", "let_go"]


def arrive(
    ctx: Ctx,
    machine: Machine,
    inst: Instance,
    run: Run,
    arrival: str,
    params: dict[str, Any],
    notes: tuple[str, ...],
    *,
    created: bool = False,
    interrupted: Place | bool | None = False,
) -> Outcome:
    """Commit a move that leaves the instance in `run.state` (entry block or completion)."""
    if run.passed:
        arrival += " via " + ", ".join(run.passed)
    rest = machine.states[run.state]
    resume_state = inst.resume_state if rest.fallback else None
    final = rest.final
    from_state = None if created else inst.state
    slot = ctx.session.interrupted if ctx.session else None
    if interrupted is not False:
        slot = interrupted if isinstance(interrupted, Place) else None
    if slot is not None and slot.id == inst.id:
        slot = None
    sw = session_write(ctx, None if final else inst.place, slot)
    new = inst._replace(
        ref=run.ref,
        state=run.state,
        visits=run.visits,
        status=COMPLETED if final else ACTIVE,
        holder=None if final else sw.session.key,
        holder_seen=ctx.at,
        resume_state=None if final else resume_state,
        version=inst.version + 1,
        updated=ctx.at,
    )
    passed = tuple(f"Passed through: {s}" for s in run.passed)
    trace = run.trace()
    record = history(ctx, new, params, from_state, arrival, (*notes, *passed, *trace))
    writes = (InstanceWrite(new, inst.version, record),)
    header = machine_header(ctx, machine, new, run.state, run.visits)
    shown_params = tuple(params.items())
    if not final:
        reply = Reply(header, arrival, shown_params, notes, trace, instructions=tuple(run.prompts))
    else:
        view = idle_view(ctx.loaded, ctx.reader, sw.session, [new])
        text, failure = idle_prompt(ctx.loaded, ctx.host)
        prompts = (*run.prompts, text) if text else tuple(run.prompts)
        reply = Reply(
            header,
            arrival,
            shown_params,
            notes,
            (*trace, failure) if failure else trace,
            instructions=prompts,
            completed=f"{machine.kind} {new.label}",
            idle=view.idle,
            events=view.events,
        )
    audit = audits(ctx, sw, machine.id, new.label, from_state, new.state)
    return Outcome(True, reply, writes, sw, audit)


def let_go(
    ctx: Ctx,
    machine: Machine | None,
    inst: Instance,
    notes: tuple[str, ...],
    prompts: list[str],
    run: Run | None = None,
    extra: tuple[InstanceWrite, ...] = (),
    slot: Place | bool | None = False,
    status: str = PAUSED,
) -> Outcome:
    """Put the held instance aside (pause, or unmatched to idle) and return to idle."""
    new = inst._replace(
        status=status,
        holder=ctx.key if status == INTERRUPTED else None,
        version=inst.version + 1,
        updated=ctx.at,
        holder_seen=ctx.at,
    )
    keep_slot = ctx.session.interrupted if ctx.session else None
    sw = session_write(ctx, None, keep_slot if slot is False else slot)  # type: ignore[arg-type]
    trace = run.trace() if run else ()
    record = history(ctx, new, {}, inst.state, None, (*notes, *trace))
    writes = (*extra, InstanceWrite(new, inst.version, record))
    view = idle_view(ctx.loaded, ctx.reader, sw.session, [w.instance for w in writes])
    text, failure = idle_prompt(ctx.loaded, ctx.host)
    reply = Reply(
        Header(ctx.key),
        notes=notes,
        trace=(*trace, failure) if failure else trace,
        instructions=(*prompts, text) if text else tuple(prompts),
        idle=view.idle,
        events=view.events,
    )
    audit = audits(ctx, sw, inst.machine, inst.label, inst.state, inst.state)
    return Outcome(True, reply, writes, sw, audit)
