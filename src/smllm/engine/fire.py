"""Firing one event: `fire(loaded, call, reader, host) -> Outcome` (engine.md §4 – §7).

The outcome holds the reply and the writes; the store applies the writes in one versioned
commit, and nothing here touches a store. Every check that can refuse comes before `Run`
runs the first action, so a refused call returns no instance write (only the clean-ups of
engine.md §4.1 touch the session).
"""

from __future__ import annotations

from ..machine.config import Loaded
from ..machine.model import Machine, State
from .builtins import do_yield, let_go, resume_fallback, state_gone, unconfigured, unmatched
from .call import Call, Outcome
from .host import Host, Reader
from .idle import idle_prompt, idle_view, left_message
from .records import (
    ACTIVE,
    COMPLETED,
    AuditRecord,
    HistoryRecord,
    Instance,
    InstanceWrite,
    Place,
    Session,
    SessionWrite,
    iso,
)
from .reply import Header, Reply
from .rules import NOTE_PARAM, check_params, duplicate, machine_offers, state_events, too_large
from .steps import Run

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Call", "Outcome", "fire", "lost"]

_SESSION_FIELDS = frozenset({"holding", "interrupted", "yielded", "blocks", "lastActive"})


def lost(loaded: Loaded, call: Call, reader: Reader, host: Host, message: str) -> Outcome:
    """The reply to a call whose commit lost a race (engine.md §10): a session that held an
    instance returns to idle; in idle (or keyless) the call is refused with `message`."""
    f = _Fire(loaded, call, reader, host)
    if call.session is not None and call.session.holding is not None:
        return f.moved(message)
    return f.refuse_idle(message)


def fire(loaded: Loaded, call: Call, reader: Reader, host: Host) -> Outcome:
    """Fire `call.event`; see engine.md §4.1 for the order of work."""
    return _Fire(loaded, call, reader, host).run()


class _Fire:
    def __init__(self, loaded: Loaded, call: Call, reader: Reader, host: Host) -> None:
        self.loaded = loaded
        self.call = call
        self.reader = reader
        self.host = host
        self.at = iso(host.now())
        self.session = call.session
        self.key = call.session.key if call.session is not None else None
        self.event = call.event
        self.pending_session: SessionWrite | None = None

    # -- replies that change nothing -----------------------------------------------------------

    def idle_header(self) -> Header:
        return Header(self.key)

    def refuse_idle(self, message: str, session_write: SessionWrite | None = None) -> Outcome:
        view = idle_view(self.loaded, self.reader, self.session)
        return Outcome(
            False,
            Reply(self.idle_header(), error=message, events=view.events),
            session=session_write,
        )

    def machine_header(
        self,
        machine: Machine | None,
        inst: Instance,
        state: str | None = None,
        visits: dict[str, int] | None = None,
        label: str | None = None,
    ) -> Header:
        name = state or inst.state
        return Header(
            self.key,
            inst.machine,
            name,
            (visits or inst.visits).get(name, 1),
            machine.kind if machine else "instance",
            label if label is not None else inst.label,
        )

    def refuse_machine(
        self, machine: Machine, state: State, inst: Instance, message: str
    ) -> Outcome:
        return Outcome(
            False,
            Reply(
                self.machine_header(machine, inst),
                error=message,
                events=state_events(machine, state, inst, self.key),
            ),
        )

    # -- session writes ------------------------------------------------------------------------

    def session_write(self, holding: Place | None, interrupted: Place | None) -> SessionWrite:
        yielded = self.event == "yield"
        s = self.session
        if s is None and self.pending_session is not None:
            new = self.pending_session.session._replace(
                holding=holding, interrupted=interrupted, yielded=yielded
            )
            return self.pending_session._replace(session=new)
        if s is None:
            key = self.host.new_id("sm-")
            while self.reader.session_taken(key):
                key = self.host.new_id("sm-")
            self.key = key
            c = self.call
            new = Session(
                key,
                c.harness,
                c.host_session,
                c.cwd,
                c.configs,
                holding,
                interrupted,
                yielded,
                0,
                1,
                self.at,
                self.at,
            )
            return SessionWrite(new, True, None, _SESSION_FIELDS)
        new = s._replace(
            holding=holding,
            interrupted=interrupted,
            yielded=yielded,
            blocks=0,
            version=s.version + 1,
            last_active=self.at,
        )
        return SessionWrite(new, False, s.holding, _SESSION_FIELDS)

    def audits(
        self, sw: SessionWrite, machine: str, label: str, from_state: str | None, to_state: str
    ) -> tuple[AuditRecord, ...]:
        out = []
        if sw.create:
            s = sw.session
            out.append(
                AuditRecord(
                    self.at,
                    "bind",
                    {
                        "harness": s.harness,
                        "hostSession": s.host_session,
                        "cwd": s.cwd,
                        "configs": list(s.configs),
                    },
                )
            )
        out.append(
            AuditRecord(
                self.at,
                "event",
                {
                    "event": self.event,
                    "source": self.call.source,
                    "machine": machine,
                    "label": label,
                    "from": from_state,
                    "to": to_state,
                },
            )
        )
        return tuple(out)

    def history(
        self,
        inst: Instance,
        params: dict[str, Any],
        from_state: str | None,
        arrival: str | None,
        trace: tuple[str, ...],
    ) -> HistoryRecord:
        assert self.key is not None
        return HistoryRecord(
            self.at,
            self.key,
            self.call.source,
            self.event,
            params,
            from_state,
            inst.state,
            arrival,
            inst.status,
            inst.version,
            trace,
        )

    # -- the call ------------------------------------------------------------------------------

    def run(self) -> Outcome:
        s = self.session
        if s is None or s.holding is None:
            return self.in_idle()
        inst = self.reader.instance(*s.holding)
        left = left_message(self.loaded, s, inst, s.holding)
        if left is not None:
            return self.moved(left)
        assert inst is not None
        machine = self.loaded.machines.get(inst.machine)
        if machine is None:
            return unconfigured(self, inst)
        state = machine.states.get(inst.state)
        if state is None:
            return state_gone(self, machine, inst)
        return self.in_state(machine, state, inst)

    def moved(self, message: str) -> Outcome:
        """engine.md §7.1: back to idle (written), the event refused."""
        s = self.session
        assert s is not None
        new = s._replace(holding=None, version=s.version + 1, last_active=self.at)
        sw = SessionWrite(new, False, s.holding, frozenset({"holding", "lastActive"}))
        self.session = new
        view = idle_view(self.loaded, self.reader, new)
        text, failure = idle_prompt(self.loaded, self.host)
        reply = Reply(
            self.idle_header(),
            trace=(failure,) if failure else (),
            error=message,
            instructions=(text,) if text else (),
            idle=view.idle,
            events=view.events,
        )
        return Outcome(
            False, reply, session=sw, audit=(AuditRecord(self.at, "moved", {"message": message}),)
        )

    # -- machine states ------------------------------------------------------------------------
    def in_state(self, machine: Machine, state: State, inst: Instance) -> Outcome:
        offered = machine_offers(machine, state, inst, self.call.source)
        event = self.event
        # checked before "not offered", whatever the state (engine.md §4.1 step 3)
        if self.call.source == "agent" and machine.source(event) == "host":
            return self.refuse_machine(
                machine,
                state,
                inst,
                f"{event} is an event that only the host fires (offered: {', '.join(offered)})",
            )
        if event not in offered:
            return self.refuse_machine(
                machine, state, inst, f"{event} is not offered here (offered: {', '.join(offered)})"
            )
        large = too_large(event, self.call.params)
        if large is not None:
            return self.refuse_machine(machine, state, inst, large)
        if event == "yield":
            specs = state.params.get("yield", (NOTE_PARAM,))
        elif event in state.on:
            specs = state.params.get(event, ())
        else:
            specs = ()
        ev = machine.events.get(event)
        problem, params = check_params(event, specs, ev.defs if ev else None, self.call.params)
        if problem is not None:
            return self.refuse_machine(machine, state, inst, problem)
        if event == "yield":
            return do_yield(self, machine, inst, params)
        if event == "pause":
            run = self.new_run(machine, inst, params)
            run.exit(state, (state.name, ""))
            return let_go(
                self,
                machine,
                inst,
                (f"Paused {machine.kind} {inst.label} at {state.name}.",),
                run.prompts,
                run,
            )
        if event == "unmatched":
            return unmatched(self, machine, state, inst)
        if event == "resume":
            return resume_fallback(self, machine, state, inst)
        return self.machine_event(machine, state, inst, params)

    def new_run(
        self, machine: Machine, inst: Instance, params: dict[str, Any], ref: str | None = None
    ) -> Run:
        if self.session is None and self.pending_session is None:
            # a keyless enter: the session exists only if the enter is accepted; its key is
            # drawn now so the commands of this call see SMLLM_SESSION
            self.pending_session = self.session_write(None, None)
        return Run(
            self.host,
            machine,
            session=self.key or "",
            instance=inst.id,
            ref=ref if ref is not None else inst.ref,
            state=inst.state,
            visits=inst.visits,
            event=self.event,
            params=params,
            cwd=self.session.cwd if self.session else self.call.cwd,
        )

    def machine_event(
        self, machine: Machine, state: State, inst: Instance, params: dict[str, Any]
    ) -> Outcome:
        run = self.new_run(machine, inst, params)
        chosen = run.choose(state.on[self.event], state.name)
        if chosen is None:
            return self.refuse_machine(
                machine,
                state,
                inst,
                f"no transition of {self.event} matched in {state.name}; nothing changed",
            )
        if chosen.set_ref:
            value = params.get(machine.ref.param)
            problem = self.ref_problem(machine, inst, value)
            if problem is not None:
                return self.refuse_machine(machine, state, inst, problem)
        run.take(state, chosen, f"{state.name} {self.event} actions")
        run.settle()
        arrival = f"{self.event} from {state.name}"
        return self.arrive(machine, inst, run, arrival, params, ())

    def ref_problem(self, machine: Machine, inst: Instance, value: Any) -> str | None:
        if not isinstance(value, str) or value == inst.ref:
            return None
        if not value:
            return f"{self.event} param {machine.ref.param} can't be empty: it becomes the ref"
        if inst.ref is not None:
            return (
                f"{machine.kind} {inst.id} already has ref {inst.ref}, and smllm sets a ref "
                "only once"
            )
        other = self.reader.find(machine.id, value)
        if other is not None and other.id != inst.id:
            return f"another {machine.kind} of {machine.id} already has ref {value}"
        return None

    def arrive(
        self,
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
        slot = self.session.interrupted if self.session else None
        if interrupted is not False:
            slot = interrupted if isinstance(interrupted, Place) else None
        if slot is not None and slot.id == inst.id:
            slot = None
        sw = self.session_write(None if final else inst.place, slot)
        new = inst._replace(
            ref=run.ref,
            state=run.state,
            visits=run.visits,
            status=COMPLETED if final else ACTIVE,
            holder=None if final else sw.session.key,
            holder_seen=self.at,
            resume_state=None if final else resume_state,
            version=inst.version + 1,
            updated=self.at,
        )
        passed = tuple(f"Passed through: {s}" for s in run.passed)
        trace = run.trace()
        record = self.history(new, params, from_state, arrival, (*notes, *passed, *trace))
        writes = (InstanceWrite(new, inst.version, record),)
        header = self.machine_header(machine, new, run.state, run.visits)
        shown_params = tuple(params.items())
        if not final:
            reply = Reply(
                header, arrival, shown_params, notes, trace, instructions=tuple(run.prompts)
            )
        else:
            view = idle_view(self.loaded, self.reader, sw.session, [new])
            text, failure = idle_prompt(self.loaded, self.host)
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
        audit = self.audits(sw, machine.id, new.label, from_state, new.state)
        return Outcome(True, reply, writes, sw, audit)

    # -- idle ----------------------------------------------------------------------------------
    def in_idle(self) -> Outcome:
        from .enter import enter, resume_idle

        view = idle_view(self.loaded, self.reader, self.session)
        offered = [item.name for item in view.events.items]
        # a slot the view no longer offers resume for is stale: resume still gets its §5.2
        # message and clean-up, which empties the slot
        stale_slot = self.event == "resume" and self.session is not None and (
            self.session.interrupted is not None
        )
        if self.event not in offered and not stale_slot:
            return Outcome(
                False,
                Reply(
                    self.idle_header(),
                    error=f"{self.event} is not offered in idle (offered: {', '.join(offered)})",
                    events=view.events,
                ),
            )
        large = too_large(self.event, self.call.params)
        if large is not None:
            return self.refuse_idle(large)
        if self.event == "enter":
            return enter(self)
        name = duplicate(self.call.params)
        if name is not None:
            return self.refuse_idle(f"{self.event} got param {name} more than once")
        if self.call.params:
            return self.refuse_idle(
                f"{self.event} takes no params, but got {self.call.params[0][0]}"
            )
        if self.event == "resume":
            return resume_idle(self)
        every = idle_view(self.loaded, self.reader, self.session, every_paused=True)
        return Outcome(True, Reply(self.idle_header(), idle=every.idle, events=every.events))
