"""What one call knows (`Ctx`, frozen) and the values every handler builds from it: headers,
refusals, the session write, the history and audit records (engine.md §4.2, §11).

A handler never changes a context: one that needs another (a keyless `enter` making its
session) gets a new one from `with_new_session`, and passes it on.
"""

from __future__ import annotations

from ..machine.model import Loaded, Machine, State
from ..recordclass import Record
from .call import Call, Outcome
from .host import Host, Reader
from .idle import idle_view
from .records import AuditRecord, HistoryRecord, Instance, Place, Session, SessionWrite, iso
from .reply import Header, Reply
from .rules import state_events
from .steps import Run

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "SESSION_FIELDS",
    "Ctx",
    "audits",
    "begin",
    "bind_audit",
    "history",
    "machine_header",
    "new_run",
    "new_session",
    "refuse_idle",
    "refuse_machine",
    "session_write",
    "with_new_session",
]

#: the session fields an accepted event sets (engine.md §4.2)
SESSION_FIELDS = frozenset({"holding", "interrupted", "yielded", "blocks", "lastActive"})


class Ctx(Record):
    """One call: the machines, the event, the readers, and the one clock reading (§12)."""

    loaded: Loaded
    call: Call
    reader: Reader
    host: Host
    at: str
    session: Session | None  # None: a keyless enter that hasn't made its session yet
    created: bool = False  # the session is this call's (a keyless enter): its write creates it

    @property
    def key(self) -> str | None:
        return self.session.key if self.session is not None else None

    @property
    def event(self) -> str:
        return self.call.event


def begin(loaded: Loaded, call: Call, reader: Reader, host: Host) -> Ctx:
    return Ctx(loaded, call, reader, host, iso(host.now()), call.session)


def new_session(
    host: Host,
    taken: Callable[[str], bool],
    harness: str,
    host_session: str | None,
    cwd: str,
    configs: tuple[str, ...],
    at: str,
) -> Session:
    """A new session in idle, its key drawn again while `taken` (engine.md §3)."""
    key = host.new_id("sm-")
    while taken(key):
        key = host.new_id("sm-")
    return Session(key, harness, host_session, cwd, configs, None, None, False, 0, 1, at, at)


def bind_audit(session: Session, at: str) -> AuditRecord:
    """The audit record of a session's creation (engine.md §11)."""
    return AuditRecord(
        at,
        "bind",
        {
            "harness": session.harness,
            "hostSession": session.host_session,
            "cwd": session.cwd,
            "configs": list(session.configs),
        },
    )


def with_new_session(ctx: Ctx) -> Ctx:
    """A keyless enter about to run: its session exists from now (its commands see
    SMLLM_SESSION), and is written only if the enter is accepted."""
    if ctx.session is not None:
        return ctx
    c = ctx.call
    made = new_session(
        ctx.host, ctx.reader.session_taken, c.harness, c.host_session, c.cwd, c.configs, ctx.at
    )
    return ctx._replace(session=made, created=True)


def session_write(ctx: Ctx, holding: Place | None, interrupted: Place | None) -> SessionWrite:
    """The session after an accepted event: where it is now; `yielded` by a yield only."""
    s = ctx.session
    assert s is not None  # a handler that accepts has a session (with_new_session for enter)
    yielded = ctx.event == "yield"
    if ctx.created:
        new = s._replace(holding=holding, interrupted=interrupted, yielded=yielded)
        return SessionWrite(new, True, None, SESSION_FIELDS)
    new = s._replace(
        holding=holding,
        interrupted=interrupted,
        yielded=yielded,
        blocks=0,
        version=s.version + 1,
        last_active=ctx.at,
    )
    return SessionWrite(new, False, s.holding, SESSION_FIELDS)


def audits(
    ctx: Ctx, sw: SessionWrite, machine: str, label: str, from_state: str | None, to_state: str
) -> tuple[AuditRecord, ...]:
    event = AuditRecord(
        ctx.at,
        "event",
        {
            "event": ctx.event,
            "source": ctx.call.source,
            "machine": machine,
            "label": label,
            "from": from_state,
            "to": to_state,
        },
    )
    if sw.create:
        return (bind_audit(sw.session, ctx.at), event)
    return (event,)


def history(
    ctx: Ctx,
    inst: Instance,
    params: dict[str, Any],
    from_state: str | None,
    arrival: str | None,
    trace: tuple[str, ...],
) -> HistoryRecord:
    assert ctx.key is not None
    return HistoryRecord(
        ctx.at,
        ctx.key,
        ctx.call.source,
        ctx.event,
        params,
        from_state,
        inst.state,
        arrival,
        inst.status,
        inst.version,
        trace,
    )


def machine_header(
    ctx: Ctx,
    machine: Machine | None,
    inst: Instance,
    state: str | None = None,
    visits: dict[str, int] | None = None,
) -> Header:
    name = state or inst.state
    return Header(
        ctx.key,
        inst.machine,
        name,
        (visits or inst.visits).get(name, 1),
        machine.kind if machine else "instance",
        inst.label,
    )


def refuse_idle(
    ctx: Ctx, message: str, write: SessionWrite | None = None, session: Session | None = None
) -> Outcome:
    """A refusal in idle: the message and the idle events of `session` (default: the call's),
    with the clean-up `write` of engine.md §4.1 if any."""
    view = idle_view(ctx.loaded, ctx.reader, session or ctx.session)
    return Outcome(False, Reply(Header(ctx.key), error=message, events=view.events), session=write)


def refuse_machine(
    ctx: Ctx, machine: Machine, state: State, inst: Instance, message: str
) -> Outcome:
    return Outcome(
        False,
        Reply(
            machine_header(ctx, machine, inst),
            error=message,
            events=state_events(machine, state, inst, ctx.key),
        ),
    )


def new_run(
    ctx: Ctx, machine: Machine, inst: Instance, params: dict[str, Any], ref: str | None = None
) -> Run:
    """The run of this call's actions on `inst` (its commands see this call's variables)."""
    return Run(
        ctx.host,
        machine,
        session=ctx.key or "",
        instance=inst.id,
        ref=ref if ref is not None else inst.ref,
        state=inst.state,
        visits=inst.visits,
        event=ctx.event,
        params=params,
        cwd=ctx.session.cwd if ctx.session else ctx.call.cwd,
    )
