"""Built-in events in a machine state: yield, pause, unmatched, resume from the fallback, and
the two an instance keeps when its saved state is gone or its machine unconfigured (engine.md
§5.2, §5.4 – §5.6, §7.2, §7.3).

Each handler of `fire.STATE_HANDLERS` (and of the gone and unconfigured maps) takes (ctx,
machine, state, instance, params), the params already checked, and returns the outcome; `state`
is None where the saved state is gone, `machine` too where the machine isn't configured.
"""

from __future__ import annotations

from ..machine.model import Machine, State
from .call import Outcome
from .context import Ctx, audits, history, machine_header, new_run, refuse_machine, session_write
from .held import kind_of
from .moves import arrive, let_go
from .records import INTERRUPTED, PAUSED, HistoryRecord, Instance, InstanceWrite
from .reply import Reply
from .rules import gone_events, gone_note
from .steps import Run

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "do_yield",
    "interrupt_without_exit",
    "pause",
    "pause_without_exit",
    "refuse_gone",
    "resume_fallback",
    "unmatched",
]


def refuse_gone(ctx: Ctx, machine: Machine, inst: Instance, message: str) -> Outcome:
    """A refusal where the saved state is gone: the §7.3 note, and pause and unmatched."""
    return Outcome(
        False,
        Reply(
            machine_header(ctx, machine, inst),
            notes=(gone_note(machine, inst),),
            error=message,
            events=gone_events(machine, inst, ctx.key),
        ),
    )


def do_yield(
    ctx: Ctx, machine: Machine, _state: State, inst: Instance, params: dict[str, Any]
) -> Outcome:
    """engine.md §5.4: the instance stays; only its version, `updated` and history move."""
    new = inst._replace(version=inst.version + 1, updated=ctx.at, holder_seen=ctx.at)
    sw = session_write(ctx, inst.place, ctx.session.interrupted if ctx.session else None)
    record = history(ctx, new, params, inst.state, None, ())
    reply = Reply(machine_header(ctx, machine, new), yielded=inst.state)
    return Outcome(
        True,
        reply,
        (InstanceWrite(new, inst.version, record),),
        sw,
        audits(ctx, sw, machine.id, inst.label, inst.state, inst.state),
    )


def pause(
    ctx: Ctx, machine: Machine, state: State, inst: Instance, params: dict[str, Any]
) -> Outcome:
    """engine.md §5.5: the state's exit lists, then the instance is paused."""
    run = new_run(ctx, machine, inst, params)
    run.exit(state, (state.name, ""))
    note = f"Paused {machine.kind} {inst.label} at {state.name}."
    return let_go(ctx, machine, inst, (note,), run.prompts, run)


def pause_without_exit(
    ctx: Ctx, machine: Machine | None, _state: None, inst: Instance, _params: dict[str, Any]
) -> Outcome:
    """pause where the saved state is gone (§7.3) or the machine unconfigured (§7.2)."""
    kind = machine.kind if machine is not None else "instance"
    return let_go(ctx, machine, inst, (f"Paused {kind} {inst.label} at {inst.state}.",), [])


def unmatched(
    ctx: Ctx, machine: Machine, state: State, inst: Instance, _params: dict[str, Any]
) -> Outcome:
    """engine.md §5.6: a detour to the fallback state, or to idle with the slot set."""
    fb = machine.fallback
    run = new_run(ctx, machine, inst, {})
    if fb is not None and fb != state.name:
        ends = (state.name, fb)
        run.exit(state, ends)
        run.enter(machine.states[fb], ends)
        run.settle()
        with_resume = inst._replace(resume_state=state.name)
        return arrive(ctx, machine, with_resume, run, f"unmatched from {state.name}", {}, ())
    run.exit(state, (state.name, ""))
    return _interrupt(ctx, machine, inst, run.prompts, run)


def interrupt_without_exit(
    ctx: Ctx, machine: Machine, _state: None, inst: Instance, _params: dict[str, Any]
) -> Outcome:
    """unmatched where the saved state is gone (§7.3): to idle, no exit lists."""
    return _interrupt(ctx, machine, inst, [])


def _interrupt(
    ctx: Ctx, machine: Machine, inst: Instance, prompts: list[str], run: Run | None = None
) -> Outcome:
    notes: list[str] = []
    extra: tuple[InstanceWrite, ...] = ()
    s = ctx.session
    assert s is not None and ctx.key is not None
    old_slot = s.interrupted
    if old_slot is not None and old_slot.id != inst.id:
        old = ctx.reader.instance(*old_slot)
        if old is not None and old.status == INTERRUPTED and old.holder == s.key:
            kind = kind_of(ctx.loaded, old.machine)
            paused = old._replace(
                status=PAUSED, holder=None, version=old.version + 1, updated=ctx.at
            )
            note = f"Paused the previously interrupted {kind} {old.label}."
            notes.append(note)
            record = HistoryRecord(
                ctx.at,
                ctx.key,
                ctx.call.source,
                "pause",
                {},
                old.state,
                old.state,
                None,
                PAUSED,
                paused.version,
                (note,),
            )
            extra = (InstanceWrite(paused, old.version, record),)
    notes.append(
        f"Interrupted {machine.kind} {inst.label} at {inst.state}. Handle the "
        "request, then fire resume from idle."
    )
    return let_go(ctx, machine, inst, tuple(notes), prompts, run, extra, inst.place, INTERRUPTED)


def resume_fallback(
    ctx: Ctx, machine: Machine, state: State, inst: Instance, _params: dict[str, Any]
) -> Outcome:
    """engine.md §5.2 in the fallback state: back to `resumeState`."""
    back = inst.resume_state
    assert back is not None
    if back not in machine.states:
        eps = ", ".join(machine.entry_points()) or "none"
        return refuse_machine(
            ctx,
            machine,
            state,
            inst,
            f"the interrupted state {back} no longer exists; leave with one of this state's "
            f"events, or pause and enter with a state: {eps}",
        )
    run = new_run(ctx, machine, inst, {})
    ends = (state.name, back)
    run.exit(state, ends)
    run.enter(machine.states[back], ends)
    run.settle()
    return arrive(ctx, machine, inst._replace(resume_state=None), run, "resume", {}, ())
