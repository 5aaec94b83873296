"""`enter` and `resume` from idle (engine.md §5.1, §5.2)."""

from __future__ import annotations

from ..machine.model import Machine
from .call import Outcome
from .context import Ctx, new_run, refuse_idle, with_new_session
from .moves import arrive
from .records import ACTIVE, COMPLETED, INTERRUPTED, Instance, SessionWrite, minute
from .rules import enter_params, got, not_configured

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["enter", "resume_idle"]


def _one_of(states: list[str]) -> str:
    return states[0] if len(states) == 1 else "one of " + ", ".join(states)


def enter(ctx: Ctx, _params: dict[str, Any]) -> Outcome:
    """engine.md §5.1: the params checked by `rules.enter_params` (with the other legality
    checks); here, which instance and which state."""
    checked = enter_params(ctx.loaded, ctx.call.params, ctx.call.source)
    if isinstance(checked, str):
        return refuse_idle(ctx, checked)
    machine, value, state, params = checked
    ref_param = machine.ref.param
    found = ctx.reader.find(machine.id, value) if value is not None else None
    eps = machine.entry_points()
    not_ep = (
        f"{state} is not an entry point of {machine.id} (entry points: {', '.join(eps) or 'none'})"
    )
    if found is None:
        if value is not None and machine.ref.pattern is not None:
            from ..machine.regex import pattern_matches

            if not pattern_matches(machine.ref.pattern, value):
                return refuse_idle(
                    ctx,
                    f"enter param {ref_param} must match {machine.ref.pattern} {got(value)}",
                )
        if state is not None and state != machine.initial and state not in eps:
            return refuse_idle(ctx, not_ep)
        return _start(ctx, machine, value, state or machine.initial, params)
    kind = machine.kind
    label = found.label
    notes: list[str] = []
    if found.status == COMPLETED:
        if state is None:
            if not eps:
                return refuse_idle(
                    ctx,
                    f"{kind} {label} is completed, and no state is an entry point to reopen it at",
                )
            return refuse_idle(
                ctx,
                f"{kind} {label} is completed. To reopen it, fire enter with state: {_one_of(eps)}",
            )
        if state not in eps:
            return refuse_idle(ctx, not_ep)
        arrival = f"enter (reopened from {found.state})"
        notes.append(f"Reopened {kind} {label} at {state}.")
        target = state
    elif found.state not in machine.states:
        if state is None:
            return refuse_idle(
                ctx,
                f"saved state {found.state} of {kind} {label} no longer exists. "
                f"Fire enter with state: {_one_of(list(machine.states))}",
            )
        if state not in machine.states:
            return refuse_idle(ctx, f"{machine.id} has no state {state}")
        arrival = f"enter (saved state {found.state} no longer exists)"
        target = state
    elif state is None:
        arrival = "enter"
        target = found.state
    else:
        if state not in eps:
            return refuse_idle(ctx, not_ep)
        arrival = f"enter (jump from {found.state})"
        target = state
    s = ctx.session
    if found.status in (ACTIVE, INTERRUPTED) and (s is None or found.holder != s.key):
        seen = minute(found.holder_seen or found.updated)
        notes.insert(0, f"Took over from session {found.holder} (last active {seen})")
    ctx = with_new_session(ctx)  # a keyless enter's session exists from here on
    run = new_run(ctx, machine, found, params)
    run.enter(machine.states[target], ("", target))
    run.settle()
    keep = found if target == machine.fallback else found._replace(resume_state=None)
    return arrive(ctx, machine, keep, run, arrival, params, tuple(notes))


def _start(
    ctx: Ctx, machine: Machine, ref: str | None, state: str, params: dict[str, Any]
) -> Outcome:
    new_id = ctx.host.new_id("i-")
    while ctx.reader.taken(machine.id, new_id):
        new_id = ctx.host.new_id("i-")
    fresh = Instance(
        new_id, machine.id, ref, state, ACTIVE, None, None, 0, {}, None, ctx.at, ctx.at
    )
    ctx = with_new_session(ctx)  # drawn after the instance id, as ids are drawn in order
    run = new_run(ctx, machine, fresh, params)
    run.enter(machine.states[state], ("", state))
    run.settle()
    return arrive(ctx, machine, fresh, run, f"enter (new {machine.kind})", params, (), created=True)


def resume_idle(ctx: Ctx, _params: dict[str, Any]) -> Outcome:
    """engine.md §5.2 in idle: the slot's instance, back where it was put aside."""
    s = ctx.session
    assert s is not None and s.interrupted is not None
    slot = s.interrupted
    inst = ctx.reader.instance(*slot)

    def clear(message: str) -> Outcome:
        new = s._replace(interrupted=None, version=s.version + 1, last_active=ctx.at)
        sw = SessionWrite(new, False, s.holding, frozenset({"interrupted", "lastActive"}))
        return refuse_idle(ctx, message, sw, new)

    if inst is None:
        return clear("the interrupted instance is no longer interrupted")
    if inst.holder is not None and inst.holder != s.key:
        return clear(f"{inst.label} moved to session {inst.holder}")
    if inst.status != INTERRUPTED:
        return clear("the interrupted instance is no longer interrupted")
    machine = ctx.loaded.machines.get(inst.machine)
    if machine is None:
        return refuse_idle(ctx, not_configured(inst.machine))
    if inst.state not in machine.states:
        return refuse_idle(
            ctx,
            f"saved state {inst.state} no longer exists. Fire enter with "
            f"stateMachine {machine.id}, {machine.ref.param} {inst.label}, "
            f"state: {_one_of(list(machine.states))}",
        )
    run = new_run(ctx, machine, inst, {})
    run.enter(machine.states[inst.state], ("", inst.state))
    run.settle()
    return arrive(ctx, machine, inst, run, "resume", {}, (), interrupted=None)
