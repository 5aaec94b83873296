"""Built-in events in a machine state: yield, pause, unmatched, resume from the fallback;
and the held instance that can't go on (engine.md §5.4 – §5.6, §5.2, §7.2, §7.3)."""

from __future__ import annotations

from ..machine.model import Machine, State
from .call import Outcome
from .idle import idle_prompt, idle_view, kind_of
from .records import INTERRUPTED, PAUSED, HistoryRecord, Instance, InstanceWrite, Place
from .reply import Header, Reply
from .rules import gone_events, gone_note, not_configured, unconfigured_events
from .steps import Run

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from .fire import _Fire

__all__ = [
    "do_yield",
    "interrupt",
    "let_go",
    "refuse_gone",
    "resume_fallback",
    "state_gone",
    "unconfigured",
    "unmatched",
]


def unconfigured(f: _Fire, inst: Instance) -> Outcome:
    """engine.md §7.2: only pause, which lets go of the instance without exit actions."""
    if f.event != "pause" or f.call.params:
        return Outcome(
            False,
            Reply(
                f.machine_header(None, inst),
                error=not_configured(inst.machine),
                events=unconfigured_events(f.key, inst),
            ),
        )
    return let_go(f, None, inst, (f"Paused instance {inst.label} at {inst.state}.",), [])


def state_gone(f: _Fire, machine: Machine, inst: Instance) -> Outcome:
    """engine.md §7.3: only pause and unmatched, without exit actions."""
    note = gone_note(machine, inst)
    offered = ("pause", "unmatched")
    if f.event not in offered:
        message = f"{f.event} is not offered here (offered: {', '.join(offered)})"
        return refuse_gone(f, machine, inst, note, message)
    if f.call.params:
        message = f"{f.event} takes no params, but got {f.call.params[0][0]}"
        return refuse_gone(f, machine, inst, note, message)
    kind = machine.kind
    if f.event == "pause":
        return let_go(f, machine, inst, (f"Paused {kind} {inst.label} at {inst.state}.",), [])
    return interrupt(f, machine, inst, [])


def refuse_gone(f: _Fire, machine: Machine, inst: Instance, note: str, message: str) -> Outcome:
    events = gone_events(machine, inst, f.key)
    return Outcome(
        False,
        Reply(f.machine_header(machine, inst), notes=(note,), error=message, events=events),
    )


# -- machine states ------------------------------------------------------------------------


def do_yield(f: _Fire, machine: Machine, inst: Instance, params: dict[str, Any]) -> Outcome:
    new = inst._replace(version=inst.version + 1, updated=f.at, holder_seen=f.at)
    sw = f.session_write(inst.place, f.session.interrupted if f.session else None)
    record = f.history(new, params, inst.state, None, ())
    reply = Reply(f.machine_header(machine, new), yielded=inst.state)
    return Outcome(
        True,
        reply,
        (InstanceWrite(new, inst.version, record),),
        sw,
        f.audits(sw, machine.id, inst.label, inst.state, inst.state),
    )


def let_go(
    f: _Fire,
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
        holder=f.key if status == INTERRUPTED else None,
        version=inst.version + 1,
        updated=f.at,
        holder_seen=f.at,
    )
    keep_slot = f.session.interrupted if f.session else None
    sw = f.session_write(
        None,
        keep_slot if slot is False else slot,  # type: ignore[arg-type]
    )
    trace = run.trace() if run else ()
    record = f.history(new, {}, inst.state, None, (*notes, *trace))
    writes = (*extra, InstanceWrite(new, inst.version, record))
    view = idle_view(f.loaded, f.reader, sw.session, [w.instance for w in writes])
    text, failure = idle_prompt(f.loaded, f.host)
    reply = Reply(
        Header(f.key),
        notes=notes,
        trace=(*trace, failure) if failure else trace,
        instructions=(*prompts, text) if text else tuple(prompts),
        idle=view.idle,
        events=view.events,
    )
    audit = f.audits(sw, inst.machine, inst.label, inst.state, inst.state)
    return Outcome(True, reply, writes, sw, audit)


def unmatched(f: _Fire, machine: Machine, state: State, inst: Instance) -> Outcome:
    fb = machine.fallback
    if fb is not None and fb != state.name:
        run = f.new_run(machine, inst, {})
        ends = (state.name, fb)
        run.exit(state, ends)
        run.enter(machine.states[fb], ends)
        run.settle()
        with_resume = inst._replace(resume_state=state.name)
        return f.arrive(machine, with_resume, run, f"unmatched from {state.name}", {}, ())
    run = f.new_run(machine, inst, {})
    run.exit(state, (state.name, ""))
    return interrupt(f, machine, inst, run.prompts, run)


def interrupt(
    f: _Fire, machine: Machine, inst: Instance, prompts: list[str], run: Run | None = None
) -> Outcome:
    notes: list[str] = []
    extra: tuple[InstanceWrite, ...] = ()
    s = f.session
    assert s is not None
    old_slot = s.interrupted
    if old_slot is not None and old_slot.id != inst.id:
        old = f.reader.instance(*old_slot)
        if old is not None and old.status == INTERRUPTED and old.holder == s.key:
            kind = kind_of(f.loaded, old.machine)
            paused = old._replace(status=PAUSED, holder=None, version=old.version + 1, updated=f.at)
            note = f"Paused the previously interrupted {kind} {old.label}."
            notes.append(note)
            assert f.key is not None
            rec = HistoryRecord(
                f.at,
                f.key,
                f.call.source,
                "pause",
                {},
                old.state,
                old.state,
                None,
                PAUSED,
                paused.version,
                (note,),
            )
            extra = (InstanceWrite(paused, old.version, rec),)
    notes.append(
        f"Interrupted {machine.kind} {inst.label} at {inst.state}. Handle the "
        "request, then fire resume from idle."
    )
    return let_go(f, machine, inst, tuple(notes), prompts, run, extra, inst.place, INTERRUPTED)


def resume_fallback(f: _Fire, machine: Machine, state: State, inst: Instance) -> Outcome:
    back = inst.resume_state
    assert back is not None
    if back not in machine.states:
        eps = ", ".join(machine.entry_points()) or "none"
        return f.refuse_machine(
            machine,
            state,
            inst,
            f"the interrupted state {back} no "
            "longer exists; leave with one of this state's events, or "
            f"pause and enter with a state: {eps}",
        )
    run = f.new_run(machine, inst, {})
    ends = (state.name, back)
    run.exit(state, ends)
    run.enter(machine.states[back], ends)
    run.settle()
    return f.arrive(machine, inst._replace(resume_state=None), run, "resume", {}, ())


# -- idle ----------------------------------------------------------------------------------
