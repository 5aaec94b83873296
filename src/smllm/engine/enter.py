"""`enter` and `resume` from idle (engine.md §5.1, §5.2)."""

from __future__ import annotations

from ..machine.model import Machine
from .call import Outcome
from .records import ACTIVE, COMPLETED, INTERRUPTED, Instance, SessionWrite, minute
from .rules import duplicate, not_configured, quoted

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from .fire import _Fire

__all__ = ["enter", "resume_idle"]


def _one_of(states: list[str]) -> str:
    return states[0] if len(states) == 1 else "one of " + ", ".join(states)


def enter(f: _Fire) -> Outcome:
    given = f.call.params
    name = duplicate(given)
    if name is not None:
        return f.refuse_idle(f"enter got param {name} more than once")
    # null and "" count as absent: an empty ref or state is how an agent leaves one out
    values = {n: v for n, v in given if v is not None and v != ""}
    machine_id = values.get("stateMachine")
    if machine_id is None:
        return f.refuse_idle("enter needs param stateMachine")
    if not isinstance(machine_id, str):
        return f.refuse_idle("enter param stateMachine must be a string")
    machine = f.loaded.machines.get(machine_id)
    if machine is None and not f.loaded.machines:
        return f.refuse_idle(
            "enter param stateMachine must name a configured state machine, and none is "
            f"configured (got {quoted(machine_id)}); add one with smllm new ID --write"
        )
    if machine is None:
        return f.refuse_idle(
            "enter param stateMachine must be one of: "
            f"{', '.join(f.loaded.machines)} (got {quoted(machine_id)})"
        )
    ref_param = machine.ref.param
    for n, _v in given:
        if n not in ("stateMachine", ref_param, "state"):
            return f.refuse_idle(
                f"enter has no param {n} for {machine.id} (params: "
                f"stateMachine, {ref_param}, state)"
            )
    for n in (ref_param, "state"):
        if n in values and not isinstance(values[n], str):
            return f.refuse_idle(f"enter param {n} must be a string")
    if f.call.source == "agent" and machine.host_only():
        return f.refuse_idle(
            f"state machine {machine.id} needs a host to drive it: only the "
            f"host fires its events {', '.join(machine.host_events())}"
        )
    value: str | None = values.get(ref_param)
    state: str | None = values.get("state")
    params = {"stateMachine": machine_id}
    if value is not None:
        params[ref_param] = value
    if state is not None:
        params["state"] = state
    found = f.reader.find(machine.id, value) if value is not None else None
    eps = machine.entry_points()
    not_ep = (
        f"{state} is not an entry point of {machine.id} (entry points: {', '.join(eps) or 'none'})"
    )
    if found is None:
        if value is not None and machine.ref.pattern is not None:
            from ..machine.regex import pattern_matches

            if not pattern_matches(machine.ref.pattern, value):
                return f.refuse_idle(
                    f"enter param {ref_param} must match {machine.ref.pattern} "
                    f"(got {quoted(value)})"
                )
        if state is not None and state != machine.initial and state not in eps:
            return f.refuse_idle(not_ep)
        return _start(f, machine, value, state or machine.initial, params)
    kind = machine.kind
    label = found.label
    notes: list[str] = []
    if found.status == COMPLETED:
        if state is None:
            if not eps:
                return f.refuse_idle(
                    f"{kind} {label} is completed, and no state is an entry point to reopen it at"
                )
            return f.refuse_idle(
                f"{kind} {label} is completed. To reopen it, fire enter with state: {_one_of(eps)}"
            )
        if state not in eps:
            return f.refuse_idle(not_ep)
        arrival = f"enter (reopened from {found.state})"
        notes.append(f"Reopened {kind} {label} at {state}.")
        target = state
    elif found.state not in machine.states:
        if state is None:
            return f.refuse_idle(
                f"saved state {found.state} of {kind} {label} no longer exists. "
                f"Fire enter with state: {_one_of(list(machine.states))}"
            )
        if state not in machine.states:
            return f.refuse_idle(f"{machine.id} has no state {state}")
        arrival = f"enter (saved state {found.state} no longer exists)"
        target = state
    elif state is None:
        arrival = "enter"
        target = found.state
    else:
        if state not in eps:
            return f.refuse_idle(not_ep)
        arrival = f"enter (jump from {found.state})"
        target = state
    s = f.session
    if found.status in (ACTIVE, INTERRUPTED) and (s is None or found.holder != s.key):
        seen = minute(found.holder_seen or found.updated)
        notes.insert(0, f"Took over from session {found.holder} (last active {seen})")
    run = f.new_run(machine, found, params)
    run.enter(machine.states[target], ("", target))
    run.settle()
    keep = found if target == machine.fallback else found._replace(resume_state=None)
    return f.arrive(machine, keep, run, arrival, params, tuple(notes))


def _start(
    f: _Fire, machine: Machine, ref: str | None, state: str, params: dict[str, Any]
) -> Outcome:
    new_id = f.host.new_id("i-")
    while f.reader.taken(machine.id, new_id):
        new_id = f.host.new_id("i-")
    fresh = Instance(new_id, machine.id, ref, state, ACTIVE, None, None, 0, {}, None, f.at, f.at)
    run = f.new_run(machine, fresh, params)
    run.enter(machine.states[state], ("", state))
    run.settle()
    return f.arrive(machine, fresh, run, f"enter (new {machine.kind})", params, (), created=True)


def resume_idle(f: _Fire) -> Outcome:
    s = f.session
    assert s is not None and s.interrupted is not None
    slot = s.interrupted
    inst = f.reader.instance(*slot)

    def clear(message: str) -> Outcome:
        new = s._replace(interrupted=None, version=s.version + 1, last_active=f.at)
        sw = SessionWrite(new, False, s.holding, frozenset({"interrupted", "lastActive"}))
        f.session = new
        return f.refuse_idle(message, sw)

    if inst is None:
        return clear("the interrupted instance is no longer interrupted")
    if inst.holder is not None and inst.holder != s.key:
        return clear(f"{inst.label} moved to session {inst.holder}")
    if inst.status != INTERRUPTED:
        return clear("the interrupted instance is no longer interrupted")
    machine = f.loaded.machines.get(inst.machine)
    if machine is None:
        return f.refuse_idle(not_configured(inst.machine))
    if inst.state not in machine.states:
        return f.refuse_idle(
            f"saved state {inst.state} no longer exists. Fire enter with "
            f"stateMachine {machine.id}, {machine.ref.param} {inst.label}, "
            f"state: {_one_of(list(machine.states))}"
        )
    run = f.new_run(machine, inst, {})
    run.enter(machine.states[inst.state], ("", inst.state))
    run.settle()
    return f.arrive(machine, inst, run, "resume", {}, (), interrupted=None)
