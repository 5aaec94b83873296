"""Firing one event: `fire(loaded, call, reader, host) -> Outcome` (engine.md §4 – §7).

Rule 1: which events are legal where lives in two places only: `rules.py` says what each place
offers and checks params; the `*_HANDLERS` maps below say who handles an offered event in each
place.
Rule 2: every check that can refuse comes before a handler runs its first action, so a refused
call returns no instance write (only the clean-ups of engine.md §4.1 touch the session).
Rule 3: nothing here touches a store; the outcome holds the writes, and the caller commits them.

A call is in one of four places: idle (no instance held), a state of a configured machine, an
instance whose saved state no longer exists (§7.3), or one whose machine isn't configured
(§7.2). The held checks of §7.1 come first and may return the session to idle.
"""

from __future__ import annotations

from ..errors import RefTaken, StoreConflict, StoreError
from ..machine.model import Loaded, Machine, State
from . import builtins, enter
from .call import Call, Outcome
from .context import Ctx, begin, machine_header, new_run, refuse_idle, refuse_machine
from .held import kind_of, left_message
from .host import Host, Reader
from .idle import idle_prompt, idle_view
from .moves import arrive
from .records import AuditRecord, Instance, SessionWrite
from .reply import Header, Reply
from .rules import (
    GONE_OFFERS,
    MACHINE_EVENT,
    NOTE_PARAM,
    check_params,
    echo,
    machine_offers,
    not_configured,
    too_large,
    unconfigured_events,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    IdleHandler = Callable[[Ctx, dict[str, Any]], Outcome]
    StateHandler = Callable[[Ctx, Machine, State, Instance, dict[str, Any]], Outcome]
    GoneHandler = Callable[[Ctx, Machine, None, Instance, dict[str, Any]], Outcome]
    UnconfiguredHandler = Callable[[Ctx, None, None, Instance, dict[str, Any]], Outcome]

__all__ = [
    "GONE_HANDLERS",
    "IDLE_HANDLERS",
    "STATE_HANDLERS",
    "UNCONFIGURED_HANDLERS",
    "Call",
    "Outcome",
    "fire",
    "lost",
]


def _list_paused(ctx: Ctx, _params: dict[str, Any]) -> Outcome:
    every = idle_view(ctx.loaded, ctx.reader, ctx.session, every_paused=True)
    return Outcome(True, Reply(Header(ctx.key), idle=every.idle, events=every.events))


def _machine_event(
    ctx: Ctx, machine: Machine, state: State, inst: Instance, params: dict[str, Any]
) -> Outcome:
    run = new_run(ctx, machine, inst, params)
    chosen = run.choose(state.on[ctx.event], state.name)
    if chosen is None:
        return refuse_machine(
            ctx,
            machine,
            state,
            inst,
            f"no transition of {ctx.event} matched in {state.name}; nothing changed",
        )
    if chosen.set_ref:
        problem = _ref_problem(ctx, machine, inst, params.get(machine.ref.param))
        if problem is not None:
            return refuse_machine(ctx, machine, state, inst, problem)
    run.take(state, chosen, f"{state.name} {ctx.event} actions")
    run.settle()
    return arrive(ctx, machine, inst, run, f"{ctx.event} from {state.name}", params, ())


def _ref_problem(ctx: Ctx, machine: Machine, inst: Instance, value: Any) -> str | None:
    if not isinstance(value, str) or value == inst.ref:
        return None
    if not value:
        return f"{ctx.event} param {machine.ref.param} can't be empty: it becomes the ref"
    if inst.ref is not None:
        return (
            f"{machine.kind} {inst.id} already has ref {inst.ref}, and smllm sets a ref only once"
        )
    other = ctx.reader.find(machine.id, value)
    if other is not None and other.id != inst.id:
        return f"another {machine.kind} of {machine.id} already has ref {value}"
    return None


#: place × offered event → its handler. `rules.py` decides what is offered (and so legal) in
#: each place; an event offered but missing here would be a bug, which `fire` asserts.
#: Idle handlers take (ctx, params); the others (ctx, machine, state, instance, params),
#: `state` being None where the saved state is gone or the machine isn't configured.
#: who handles an offered event, per place (rules.py says what each place offers), each map
#: typed with what its place can give a handler: idle has no instance; a state has its
#: machine, state and instance; a gone state has no state; an unconfigured machine neither
IDLE_HANDLERS: dict[str, IdleHandler] = {
    "enter": enter.enter,
    "resume": enter.resume_idle,
    "listPaused": _list_paused,
}
STATE_HANDLERS: dict[str, StateHandler] = {
    MACHINE_EVENT: _machine_event,
    "yield": builtins.do_yield,
    "pause": builtins.pause,
    "unmatched": builtins.unmatched,
    "resume": builtins.resume_fallback,
}
GONE_HANDLERS: dict[str, GoneHandler] = {
    "pause": builtins.pause_without_exit,
    "unmatched": builtins.interrupt_without_exit,
}
UNCONFIGURED_HANDLERS: dict[str, UnconfiguredHandler] = {
    "pause": builtins.pause_without_exit,
}


def fire(loaded: Loaded, call: Call, reader: Reader, host: Host) -> Outcome:
    """Fire `call.event`; see engine.md §4.1 for the order of work."""
    ctx = begin(loaded, call, reader, host)
    s = ctx.session
    if s is None or s.holding is None:
        return _in_idle(ctx)
    inst = reader.instance(*s.holding)
    left = left_message(loaded, s, inst, s.holding)
    if left is not None:
        return moved(ctx, left)
    assert inst is not None
    machine = loaded.machines.get(inst.machine)
    if machine is None:
        return _unconfigured(ctx, inst)
    state = machine.states.get(inst.state)
    if state is None:
        return _state_gone(ctx, machine, inst)
    return _in_state(ctx, machine, state, inst)


# -- the places ----------------------------------------------------------------------------


def _in_idle(ctx: Ctx) -> Outcome:
    view = idle_view(ctx.loaded, ctx.reader, ctx.session)
    offered = [item.name for item in view.events.items]
    event = ctx.event
    # a slot the view no longer offers resume for is stale: resume still gets its §5.2
    # message and clean-up, which empties the slot
    stale_slot = event == "resume" and ctx.session is not None and ctx.session.interrupted
    if event not in offered and not stale_slot:
        return Outcome(
            False,
            Reply(
                Header(ctx.key),
                error=f"{echo(event)} is not offered in idle (offered: {', '.join(offered)})",
                events=view.events,
            ),
        )
    large = too_large(event, ctx.call.params)
    if large is not None:
        return refuse_idle(ctx, large)
    if event != "enter":  # enter checks its own params (engine.md §5.1)
        problem, _ = check_params(event, (), None, ctx.call.params)
        if problem is not None:
            return refuse_idle(ctx, problem)
    return IDLE_HANDLERS[event](ctx, {})


def _in_state(ctx: Ctx, machine: Machine, state: State, inst: Instance) -> Outcome:
    offered = machine_offers(machine, state, inst, ctx.call.source)
    event = ctx.event
    # checked before "not offered", whatever the state (engine.md §4.1 step 3)
    if ctx.call.source == "agent" and machine.source(event) == "host":
        message = f"{event} is an event that only the host fires (offered: {', '.join(offered)})"
        return refuse_machine(ctx, machine, state, inst, message)
    if event not in offered:
        message = f"{echo(event)} is not offered here (offered: {', '.join(offered)})"
        return refuse_machine(ctx, machine, state, inst, message)
    large = too_large(event, ctx.call.params)
    if large is not None:
        return refuse_machine(ctx, machine, state, inst, large)
    if event == "yield":
        specs = state.params.get("yield", (NOTE_PARAM,))
    elif event in state.on:
        specs = state.params.get(event, ())
    else:
        specs = ()
    declared = machine.events.get(event)
    defs = declared.defs if declared else None
    problem, params = check_params(event, specs, defs, ctx.call.params)
    if problem is not None:
        return refuse_machine(ctx, machine, state, inst, problem)
    handler = STATE_HANDLERS.get(event) or STATE_HANDLERS[MACHINE_EVENT]
    return handler(ctx, machine, state, inst, params)


def _state_gone(ctx: Ctx, machine: Machine, inst: Instance) -> Outcome:
    """engine.md §7.3: only pause and unmatched, without exit actions."""
    event = ctx.event
    if event not in GONE_OFFERS:
        message = f"{echo(event)} is not offered here (offered: {', '.join(GONE_OFFERS)})"
        return builtins.refuse_gone(ctx, machine, inst, message)
    problem, _ = check_params(event, (), None, ctx.call.params)  # §2.4's order: no params
    if problem is not None:
        return builtins.refuse_gone(ctx, machine, inst, problem)
    return GONE_HANDLERS[event](ctx, machine, None, inst, {})


def _unconfigured(ctx: Ctx, inst: Instance) -> Outcome:
    """engine.md §7.2: only pause, which lets go of the instance without exit actions; every
    other event gets the §7.2 message (not "not offered": the machine may come back)."""
    if ctx.event != "pause" or ctx.call.params:
        return Outcome(
            False,
            Reply(
                machine_header(ctx, None, inst),
                error=not_configured(inst.machine),
                events=unconfigured_events(ctx.key, inst),
            ),
        )
    return UNCONFIGURED_HANDLERS["pause"](ctx, None, None, inst, {})


# -- replies that return the session to idle -----------------------------------------------


def lost(
    loaded: Loaded, call: Call, reader: Reader, host: Host, error: StoreError, outcome: Outcome
) -> Outcome:
    """The reply to a call whose instance commit lost a race (engine.md §10): StoreConflict
    or RefTaken from committing `outcome`. A session that held an instance returns to idle;
    in idle (or keyless) the call is refused with the message."""
    if isinstance(error, RefTaken):
        kind = kind_of(loaded, error.machine)
        message = f"another {kind} of {error.machine} already has ref {error.ref}"
    else:
        assert isinstance(error, StoreConflict)
        current = reader.instance(error.machine, error.id)
        written = (w.instance for w in outcome.instances if w.instance.id == error.id)
        label = current.label if current else next((i.label for i in written), error.id)
        kind = kind_of(loaded, error.machine)
        message = f"another session changed {kind} {label}; you are in idle"
    ctx = begin(loaded, call, reader, host)
    if call.session is not None and call.session.holding is not None:
        return moved(ctx, message)
    return refuse_idle(ctx, message)


def moved(ctx: Ctx, message: str) -> Outcome:
    """engine.md §7.1: back to idle (written), the event refused."""
    s = ctx.session
    assert s is not None
    new = s._replace(holding=None, version=s.version + 1, last_active=ctx.at)
    sw = SessionWrite(new, False, s.holding, frozenset({"holding", "lastActive"}))
    view = idle_view(ctx.loaded, ctx.reader, new)
    text, failure = idle_prompt(ctx.loaded, ctx.host)
    reply = Reply(
        Header(ctx.key),
        trace=(failure,) if failure else (),
        error=message,
        instructions=(text,) if text else (),
        idle=view.idle,
        events=view.events,
    )
    audit = (AuditRecord(ctx.at, "moved", {"message": message}),)
    return Outcome(False, reply, session=sw, audit=audit)
