"""The sans-IO engine on its own: `fire`, `view`, `stop` and `prompt_submitted` through an
in-memory `Reader` (helpers/memory_world.py) and the scripted host, no SQLite. Each test
asserts what the engine returns before the world applies it: `ok`, the reply as text, the
instance writes and their history records, the session write, the audit.

The end-to-end tests (test_builtins.py, test_enter.py, …) run the same engine through `App` and
the SQLite stores; test_engine_sans_io_world.py checks the world itself, that it runs without
SQLite, and that it and the App give byte-identical replies and records (engine.md §12).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.memory_world import DEV_MACHINE, World, write_project
from helpers.scripted_host import ScriptedHost

from smllm.engine.call import Outcome
from smllm.engine.fire import fire
from smllm.engine.host import CommandResult
from smllm.engine.prompt import prompt_submitted
from smllm.engine.records import (
    AuditRecord,
    HistoryRecord,
    Instance,
    InstanceWrite,
    Session,
    SessionWrite,
)
from smllm.engine.stop import ALLOW, stop
from smllm.engine.view import view
from smllm.errors import StoreConflict
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

HERE = Path(__file__).resolve().parent
FALLBACK = HERE / "machines" / "fallback.smllm.yaml"
ALL = frozenset({"holding", "interrupted", "yielded", "blocks", "lastActive"})
MACHINES = """State machines:
- dev: Work on an issue, from a plan to a change.
    issue id param issueId (pattern: ^GH-[0-9]+$): The issue's id, such as GH-12.
    starts at: PLAN; entry points: PLAN
- fallback: A machine with a fallback state for requests that fit no event.
    task id param taskId
    starts at: WORK; entry points: WORK"""
ENTER = """- enter: Start a new instance of a state machine, or continue one.
    stateMachine (required, one of: dev, fallback): The state machine to enter.
    issueId | taskId (optional): The id param that the list of state machines names for the \
machine: an existing id or ref continues that instance, and a new ref starts one with it. Omit \
it to start a new instance.
    state (optional): An entry point to enter instead, or any state for an instance whose \
saved state no longer exists. Omit it to enter a new instance at the initial state, or an \
existing one at its saved state."""
PLAN_EVENTS = """- planned: Fire after you write the plan in PLAN.md.
    size (required, one of: small, large): How large the change is.
- yield: Stop for now and stay in PLAN.
    note (optional): What you are waiting for.
- pause: Put issue GH-1 aside and return to idle.
- unmatched: The request fits none of these; handle it from idle, then resume."""
PLAN_PROMPT = "Write a plan for the issue in PLAN.md, then fire planned."
WORK_PROMPT = "Make the change that PLAN.md describes, then fire done."
ENTER_GH1 = (("stateMachine", "dev"), ("issueId", "GH-1"))
Params = tuple[tuple[str, Any], ...]
Scripted = World[ScriptedHost]  # a world whose host tests can script


def at(n: int) -> str:
    """The scripted clock's reading number `n` (one second a reading from 2026-01-01)."""
    return f"2026-01-01T00:00:{n:02d}.000000Z"


def block(key: str | None, *lines: str, events: str = "") -> str:
    """A reply block; `events`: the items of its events list."""
    if events:
        tool = f'session: "{key}", ' if key else ""
        lines += ("Fire one event: smllm({ " + tool + "event, params })", "<events>")
        lines += (events, "</events>")
    return "\n".join(["<smllm>", *lines, "</smllm>"])


def idle(
    key: str, *notes: str, slot: str = "", paused: tuple[str, ...] = (), prompt: str = ""
) -> str:
    """The idle reply of the dev + fallback project: notes (and `error:` lines), a prompt,
    the idle list; `slot`: the interrupted instance as `KIND LABEL (MACHINE) at STATE`."""
    lines = [f"session {key} · idle", *notes]
    lines += ["<instructions>", prompt, "</instructions>"] if prompt else []
    lines += [MACHINES, f"Interrupted: {slot}"] if slot else [MACHINES]
    lines += ["Paused:", *(f"- {p}" for p in paused)] if paused else []
    items = ENTER
    if slot:
        what, state = slot.split(" (")[0], slot.split(" at ")[-1]
        items += f"\n- resume: Go back to {what} at {state}, which unmatched put aside."
    return block(key, *lines, events=items)


def rec(n: int, key: str, event: str, params: dict[str, Any], *fields: Any) -> HistoryRecord:
    """A history record of reading `n`; `fields`: from, to, arrival, status, version, trace…"""
    frm, to, arrival, status, version, *trace = fields
    return HistoryRecord(
        at(n), key, "agent", event, params, frm, to, arrival, status, version, tuple(trace)
    )


def bumped(inst: Instance, n: int, **changes: Any) -> Instance:
    """`inst` written once more at reading `n`."""
    return inst._replace(version=inst.version + 1, updated=at(n), holder_seen=at(n), **changes)


def session_write(s: Session, n: int, changes: frozenset[str] = ALL, **fields: Any) -> SessionWrite:
    """The write of a call at reading `n` that read session `s`."""
    new = s._replace(version=s.version + 1, last_active=at(n), **fields)
    return SessionWrite(new, False, s.holding, changes)


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    loaded = load_configs((config,))
    assert loaded.findings == () and list(loaded.machines) == ["dev", "fallback"]
    return World(loaded, ScriptedHost(seed=1), cwd=cwd)


def run(world: Scripted, key: str | None, event: str, *params: tuple[str, Any]) -> Outcome:
    """The engine's outcome for the call (then committed by the world)."""
    call = world.call(key, event, *params)
    before = world.reader.dump()
    outcome = fire(world.loaded, call, world.reader, world.host)
    assert world.reader.dump() == before  # the engine only reads
    world.commit(call, outcome)
    return outcome


def entered(world: Scripted, ref: str = "GH-1", key: str | None = None) -> tuple[str, Instance]:
    """A session (new unless given) holding the dev instance `ref` at PLAN."""
    key = key or world.new_session().key
    out = run(world, key, "enter", ("stateMachine", "dev"), ("issueId", ref))
    assert out.ok, render(out.reply)
    return key, out.instances[0].instance


def kinds(out: Outcome) -> list[str]:
    return [a.kind for a in out.audit]


def nothing(out: Outcome) -> bool:
    """A refusal: no instance write, no session write, no audit."""
    return (out.ok, out.instances, out.session, out.audit) == (False, (), None, ())


# -- enter, machine events, refusals ------------------------------------------------------------


def test_keyless_enter_creates_a_session_and_an_instance(world: Scripted) -> None:
    out = run(world, None, "enter", *ENTER_GH1)
    assert out.ok and out.session is not None and len(out.instances) == 1
    key, iid = out.session.session.key, out.instances[0].instance.id
    assert (iid, key) == ("i-84g7zw", "sm-yrd6z1")  # the seed's draws: the id, then the key
    params = dict(ENTER_GH1)
    inst = Instance(
        iid, "dev", "GH-1", "PLAN", "active", key, at(0), 1, {"PLAN": 1}, None, at(0), at(0)
    )
    record = rec(0, key, "enter", params, None, "PLAN", "enter (new issue)", "active", 1)
    assert out.instances == (InstanceWrite(inst, 0, record),)
    cfg = world.configs
    session = Session(
        key, "none", None, world.cwd, cfg, inst.place, None, False, 0, 1, at(0), at(0)
    )
    assert out.session == SessionWrite(session, True, None, ALL)
    bind = {"harness": "none", "hostSession": None, "cwd": world.cwd, "configs": list(cfg)}
    event = {"event": "enter", "source": "agent", "machine": "dev", "label": "GH-1"}
    assert out.audit == (
        AuditRecord(at(0), "bind", bind),
        AuditRecord(at(0), "event", {**event, "from": None, "to": "PLAN"}),
    )
    assert render(out.reply) == block(
        key,
        f"session {key} · dev › PLAN · issue GH-1",
        "Arrived by: enter (new issue)",
        'Params: stateMachine = "dev", issueId = "GH-1"',
        *("<instructions>", PLAN_PROMPT, "</instructions>"),
    )
    r = world.reader
    assert r.sessions == {key: session} and r.instances == {iid: inst}
    assert r.history == {iid: [record]} and r.audit == {key: list(out.audit)}
    assert world.host.calls == []  # PLAN's entry runs no command


def test_a_guard_that_passes(world: Scripted) -> None:
    key, inst = entered(world)  # readings 0 (the session) and 1 (enter)
    world.host.files.add("PLAN.md")
    s = world.session(key)
    out = run(world, key, "planned", ("size", "small"))
    guard = "Guard: command `test -f PLAN.md` → true"
    new = bumped(inst, 2, state="WORK", visits={"PLAN": 1, "WORK": 1})
    arrival = "planned from PLAN"
    record = rec(2, key, "planned", {"size": "small"}, "PLAN", "WORK", arrival, "active", 2, guard)
    assert out.ok and out.instances == (InstanceWrite(new, 1, record),)
    assert out.session == session_write(s, 2)
    assert kinds(out) == ["event"] and out.audit[0].detail["to"] == "WORK"
    assert render(out.reply) == block(
        key,
        f"session {key} · dev › WORK · issue GH-1",
        "Arrived by: planned from PLAN",
        'Params: size = "small"',
        guard,
        *("<instructions>", WORK_PROMPT, "</instructions>"),
    )
    (called,) = world.host.calls
    assert (called.command.run, called.cwd) == ("test -f PLAN.md", world.cwd)
    assert called.env == {
        **{"SMLLM_SESSION": key, "SMLLM_MACHINE": "dev", "SMLLM_INSTANCE": inst.id},
        **{"SMLLM_REF": "GH-1", "SMLLM_EVENT": "planned", "SMLLM_STATE": "PLAN"},
        "SMLLM_PARAM_SIZE": "small",
    }


def test_a_guard_that_fails_takes_the_next_candidate(world: Scripted) -> None:
    key, inst = entered(world)
    world.host.files.add("PLAN.md")  # the table would pass it: the queued result decides
    world.host.results.append(CommandResult(False, "exited 3: no plan yet"))
    out = run(world, key, "planned", ("size", "large"))
    guard = "Guard: command `test -f PLAN.md` → false (exited 3: no plan yet)"
    arrival = "planned from PLAN"
    record = rec(2, key, "planned", {"size": "large"}, "PLAN", "PLAN", arrival, "active", 2, guard)
    new = bumped(inst, 2, visits={"PLAN": 2})
    assert out.ok and out.instances == (InstanceWrite(new, 1, record),)
    assert render(out.reply) == block(
        key,
        f"session {key} · dev › PLAN (visit 2) · issue GH-1",
        "Arrived by: planned from PLAN",
        'Params: size = "large"',
        guard,
        *("<instructions>", PLAN_PROMPT, "</instructions>"),
    )


@pytest.mark.parametrize(
    ("event", "params", "error"),
    [
        ("done", (), "done is not offered here (offered: planned, yield, pause, unmatched)"),
        ("resume", (), "resume is not offered here (offered: planned, yield, pause, unmatched)"),
        ("planned", (), "planned needs param size"),
        (
            "planned",
            (("size", "huge"),),
            'planned param size must be one of: small, large (got "huge")',
        ),
        ("pause", (("reason", "x"),), "pause takes no params, but got reason"),
        ("yield", (("note", "a"), ("note", "b")), "yield got param note more than once"),
    ],
)
def test_a_refusal_writes_nothing(world: Scripted, event: str, params: Params, error: str) -> None:
    key, _inst = entered(world)
    before = world.reader.dump()
    out = run(world, key, event, *params)
    assert nothing(out) and world.reader.dump() == before
    assert world.host.calls == []  # no guard ran
    header = f"session {key} · dev › PLAN · issue GH-1"
    assert render(out.reply) == block(key, header, f"error: {error}", events=PLAN_EVENTS)


def test_refusals_in_idle_and_keyless(world: Scripted) -> None:
    key = world.new_session().key
    out = run(world, key, "planned", ("size", "small"))
    error = "error: planned is not offered in idle (offered: enter)"
    assert nothing(out) and render(out.reply) == block(
        key, f"session {key} · idle", error, events=ENTER
    )
    out = run(world, None, "enter", ("stateMachine", "nope"))
    error = 'error: enter param stateMachine must be one of: dev, fallback (got "nope")'
    assert nothing(out) and render(out.reply) == block(
        None, "no session · idle", error, events=ENTER
    )
    assert list(world.reader.sessions) == [key]  # the refused keyless enter made no session


# -- yield, pause, unmatched, resume ------------------------------------------------------------


def test_yield_stays_and_marks_the_session(world: Scripted) -> None:
    key, inst = entered(world)
    s = world.session(key)
    out = run(world, key, "yield", ("note", "Which plan?"))
    record = rec(2, key, "yield", {"note": "Which plan?"}, "PLAN", "PLAN", None, "active", 2)
    assert out.ok and out.instances == (InstanceWrite(bumped(inst, 2), 1, record),)
    assert out.session == session_write(s, 2, yielded=True) and kinds(out) == ["event"]
    yielded = "Yielded: staying in PLAN. You can end your turn."
    assert render(out.reply) == block(key, f"session {key} · dev › PLAN · issue GH-1", yielded)


def test_pause_lets_go_and_lists_the_instance(world: Scripted) -> None:
    key, inst = entered(world)
    s = world.session(key)
    out = run(world, key, "pause")
    note = "Paused issue GH-1 at PLAN."
    new = bumped(inst, 2, status="paused", holder=None)
    record = rec(2, key, "pause", {}, "PLAN", "PLAN", None, "paused", 2, note)
    assert out.ok and out.instances == (InstanceWrite(new, 1, record),)
    assert out.session == session_write(s, 2, holding=None) and kinds(out) == ["event"]
    assert render(out.reply) == idle(key, note, paused=("issue GH-1 (dev) at PLAN",))


def test_unmatched_without_a_fallback_interrupts(world: Scripted) -> None:
    key, first = entered(world)
    s = world.session(key)
    out = run(world, key, "unmatched")
    note = "Interrupted issue GH-1 at PLAN. Handle the request, then fire resume from idle."
    new = bumped(first, 2, status="interrupted")  # the holder stays
    record = rec(2, key, "unmatched", {}, "PLAN", "PLAN", None, "interrupted", 2, note)
    assert out.ok and out.instances == (InstanceWrite(new, 1, record),)
    assert out.session == session_write(s, 2, holding=None, interrupted=first.place)
    assert render(out.reply) == idle(key, note, slot="issue GH-1 (dev) at PLAN")
    # a second one pauses the first (its own write and record, first), then interrupts
    _, second = entered(world, "GH-2", key)
    out = run(world, key, "unmatched")
    older = "Paused the previously interrupted issue GH-1."
    paused = new._replace(status="paused", holder=None, version=3, updated=at(4))
    record = rec(4, key, "pause", {}, "PLAN", "PLAN", None, "paused", 3, older)
    assert out.instances[0] == InstanceWrite(paused, 2, record)  # holder_seen kept
    assert [(w.instance.ref, w.instance.status, w.expected) for w in out.instances[1:]] == [
        ("GH-2", "interrupted", 1)
    ]
    assert out.session is not None and out.session.session.interrupted == second.place
    slot, gh1 = "issue GH-2 (dev) at PLAN", ("issue GH-1 (dev) at PLAN",)
    assert render(out.reply) == idle(
        key, older, note.replace("GH-1", "GH-2"), slot=slot, paused=gh1
    )


def test_resume_from_idle(world: Scripted) -> None:
    key, inst = entered(world)
    run(world, key, "unmatched")
    s = world.session(key)
    out = run(world, key, "resume")
    new = bumped(inst._replace(version=2), 3, visits={"PLAN": 2})  # active again
    record = rec(3, key, "resume", {}, "PLAN", "PLAN", "resume", "active", 3)
    assert out.ok and out.instances == (InstanceWrite(new, 2, record),)
    assert out.session == session_write(s, 3, holding=inst.place, interrupted=None)
    assert render(out.reply) == block(
        key,
        f"session {key} · dev › PLAN (visit 2) · issue GH-1",
        "Arrived by: resume",
        *("<instructions>", PLAN_PROMPT, "</instructions>"),
    )


def test_a_stale_slot_is_emptied_with_no_instance_write(world: Scripted) -> None:
    key, inst = entered(world)
    run(world, key, "unmatched")
    other, _ = entered(world, "GH-1")  # another session takes the interrupted instance over
    s = world.session(key)
    out = run(world, key, "resume")
    assert (out.ok, out.instances, out.audit) == (False, (), ())
    assert out.session == session_write(
        s, 5, frozenset({"interrupted", "lastActive"}), interrupted=None
    )
    error = f"error: GH-1 moved to session {other}"
    assert render(out.reply) == block(key, f"session {key} · idle", error, events=ENTER)
    assert world.reader.instances[inst.id].holder == other


def test_unmatched_into_the_fallback_and_resume_back(world: Scripted) -> None:
    key = world.new_session().key
    inst = (
        run(world, key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
        .instances[0]
        .instance
    )
    out = run(world, key, "unmatched")
    aside = bumped(inst, 2, state="ASIDE", visits={"WORK": 1, "ASIDE": 1}, resume_state="WORK")
    record = rec(2, key, "unmatched", {}, "WORK", "ASIDE", "unmatched from WORK", "active", 2)
    assert out.ok and out.instances == (InstanceWrite(aside, 1, record),)
    assert out.session is not None and out.session.session.holding == inst.place
    assert render(out.reply) == block(
        key,
        f"session {key} · fallback › ASIDE · task T-1",
        "Arrived by: unmatched from WORK",
        "<instructions>",
        "Leaving WORK.",
        "",  # agent-text.md §1: one blank line between two prompts
        "Handle the side request, then fire resume.",
        "</instructions>",
    )
    out = run(world, key, "resume")
    back = bumped(aside, 3, state="WORK", visits={"WORK": 2, "ASIDE": 1}, resume_state=None)
    record = rec(3, key, "resume", {}, "ASIDE", "WORK", "resume", "active", 3)
    assert out.ok and out.instances == (InstanceWrite(back, 2, record),)
    assert render(out.reply) == block(
        key,
        f"session {key} · fallback › WORK (visit 2) · task T-1",
        "Arrived by: resume",
        *("<instructions>", "Do the task.", "</instructions>"),
    )


# -- other sessions: takeover, §7.1, lost races -------------------------------------------------


def test_a_takeover_then_the_loser_moves_to_idle(world: Scripted) -> None:
    a, inst = entered(world)  # readings 0, 1
    b = world.new_session().key  # 2
    out = run(world, b, "enter", *ENTER_GH1)  # 3
    took = f"Took over from session {a} (last active 2026-01-01 00:00 UTC)"
    new = bumped(inst, 3, holder=b, visits={"PLAN": 2})
    record = rec(3, b, "enter", dict(ENTER_GH1), "PLAN", "PLAN", "enter", "active", 2, took)
    assert out.ok and out.instances == (InstanceWrite(new, 1, record),)
    assert out.session is not None and out.session.session.key == b
    assert (out.session.expected_holding, out.session.session.holding) == (None, inst.place)
    assert render(out.reply).splitlines()[1:5] == [
        f"session {b} · dev › PLAN (visit 2) · issue GH-1",
        "Arrived by: enter",
        'Params: stateMachine = "dev", issueId = "GH-1"',
        took,
    ]
    s = world.session(a)
    assert s.holding == inst.place  # a learns of it at its next call
    out = run(world, a, "planned", ("size", "small"))
    message = f"issue GH-1 moved to session {b}; you are in idle"
    assert (out.ok, out.instances) == (False, ())
    assert out.session == session_write(s, 4, frozenset({"holding", "lastActive"}), holding=None)
    assert out.audit == (AuditRecord(at(4), "moved", {"message": message}),)
    assert render(out.reply) == idle(a, f"error: {message}")
    assert world.host.calls == []  # the event itself was refused before its guard


@pytest.mark.parametrize("change", ["paused", "gone"])
def test_the_instance_changed_under_the_session(world: Scripted, change: str) -> None:
    a, inst = entered(world)
    paused: tuple[str, ...]
    if change == "paused":  # another session took it over and paused it
        b = world.new_session().key
        run(world, b, "enter", *ENTER_GH1)
        run(world, b, "pause")
        message, paused = "issue GH-1 is paused; you are in idle", ("issue GH-1 (dev) at PLAN",)
    else:  # deleted from the store
        del world.reader.instances[inst.id]
        message, paused = f"instance {inst.id} no longer exists; you are in idle", ()
    out = run(world, a, "yield")
    assert (out.ok, out.instances, kinds(out)) == (False, (), ["moved"])
    assert out.session is not None and out.session.changes == {"holding", "lastActive"}
    assert out.session.expected_holding == inst.place
    assert render(out.reply) == idle(a, f"error: {message}", paused=paused)
    assert world.session(a).holding is None


def test_a_lost_race_commits_nothing_of_the_loser(world: Scripted) -> None:
    a, inst = entered(world)
    b = world.new_session().key
    world.host.files.add("PLAN.md")
    call_a = world.call(a, "planned", ("size", "small"))
    out_a = fire(world.loaded, call_a, world.reader, world.host)  # read version 1
    run(world, b, "enter", *ENTER_GH1)  # wins: version 2
    before = world.reader.dump()
    with pytest.raises(StoreConflict):
        world.reader.apply(out_a)
    assert world.reader.dump() == before
    fired = world.commit(call_a, out_a)
    message = "another session changed issue GH-1; you are in idle"
    assert (fired.committed.ok, fired.committed.instances) == (False, ())
    assert fired.committed.audit == (AuditRecord(at(5), "moved", {"message": message}),)
    assert render(fired.committed.reply) == idle(a, f"error: {message}")
    assert world.reader.instances[inst.id].holder == b and world.session(a).holding is None


# -- completion, view, stop, prompt -------------------------------------------------------------


def test_completion_into_a_final_state(world: Scripted) -> None:
    key, inst = entered(world)
    world.host.files.add("PLAN.md")
    run(world, key, "planned", ("size", "small"))
    s = world.session(key)
    out = run(world, key, "done")
    visits = {"PLAN": 1, "WORK": 1, "DONE": 1}
    done = bumped(
        inst._replace(version=2), 3, state="DONE", status="completed", holder=None, visits=visits
    )
    record = rec(3, key, "done", {}, "WORK", "DONE", "done from WORK", "completed", 3)
    assert out.ok and out.instances == (InstanceWrite(done, 2, record),)
    assert out.session == session_write(s, 3, holding=None)
    event = {"event": "done", "source": "agent", "machine": "dev", "label": "GH-1"}
    assert out.audit == (AuditRecord(at(3), "event", {**event, "from": "WORK", "to": "DONE"}),)
    assert render(out.reply) == block(
        key,
        f"session {key} · dev › DONE · issue GH-1",
        "Arrived by: done from WORK",
        *("<instructions>", "Summarise the change for the issue.", "</instructions>"),
        "Completed issue GH-1. You are now in idle.",
        *idle(key).splitlines()[2:-1],
    )
    out = run(world, key, "enter", *ENTER_GH1)
    error = "error: issue GH-1 is completed. To reopen it, fire enter with state: PLAN"
    assert nothing(out) and render(out.reply) == block(
        key, f"session {key} · idle", error, events=ENTER
    )


def test_view_is_read_only(world: Scripted) -> None:
    key, _ = entered(world)
    before = world.reader.dump()
    reply = view(world.loaded, world.session(key), world.reader, world.host)
    assert render(reply) == block(
        key,
        f"session {key} · dev › PLAN · issue GH-1",
        *("<instructions>", PLAN_PROMPT, "</instructions>"),
        events=PLAN_EVENTS,
    )
    assert world.reader.dump() == before


def test_stop_decisions(world: Scripted) -> None:
    key = world.new_session().key
    assert world.stop(key, None) is ALLOW  # idle
    key, inst = entered(world, key=key)
    detail = {"machine": "dev", "state": "PLAN", "kind": "issue", "label": "GH-1"}
    blocked = block(key, f"session {key} · dev › PLAN · issue GH-1", events=PLAN_EVENTS)

    def decide(continuing: bool | None) -> tuple[str, SessionWrite | None, tuple[AuditRecord, ...]]:
        out = stop(world.loaded, world.session(key), continuing, world.reader, world.host)
        assert out.reply is not None and render(out.reply) == blocked
        if out.session is not None:  # committed as App.stop does
            world.reader.apply_session(out.session, out.audit)
        else:
            world.reader.append_audit(key, out.audit)
        return out.decision, out.session, out.audit

    s = world.session(key)
    changed = frozenset({"blocks", "lastActive"})
    block_1 = (
        "block",
        session_write(s, 2, changed, blocks=1),
        (AuditRecord(at(2), "block", detail),),
    )
    assert decide(None) == block_1
    assert decide(True) == ("runaway", None, (AuditRecord(at(3), "runaway", detail),))
    assert decide(None) == ("runaway", None, (AuditRecord(at(4), "runaway", detail),))
    decision, sw, _ = decide(False)  # blocks 1 and not continuing: a second block
    assert decision == "block" and sw is not None and sw.session.blocks == 2
    assert decide(False)[0] == "runaway"  # blocks 2: runaway even when not continuing
    audit_kinds = ["bind", "event", "block", "runaway", "runaway", "block", "runaway"]
    assert [a.kind for a in world.reader.audit[key]] == audit_kinds
    assert world.session(key).blocks == 2 and world.reader.instances[inst.id] == inst
    run(world, key, "yield")  # an accepted event: blocks 0, yielded
    s = world.session(key)
    assert (s.blocks, s.yielded) == (0, True)
    assert stop(world.loaded, s, None, world.reader, world.host) is ALLOW


def test_stop_after_the_instance_left(world: Scripted) -> None:
    a, _ = entered(world)
    b = world.new_session().key
    run(world, b, "enter", *ENTER_GH1)
    s = world.session(a)
    out = stop(world.loaded, s, None, world.reader, world.host)
    message = f"issue GH-1 moved to session {b}; you are in idle"
    assert out.decision == "block" and out.reply is not None
    assert render(out.reply) == idle(a, message)  # a note: a stop is not a refused event
    assert out.session == session_write(s, 4, frozenset({"holding", "lastActive"}), holding=None)
    assert out.audit == (AuditRecord(at(4), "moved", {"message": message}),)
    world.reader.apply_session(out.session, out.audit)
    assert world.stop(a, None) is ALLOW


def test_prompt_submitted(world: Scripted) -> None:
    key, _ = entered(world)
    assert prompt_submitted(world.session(key), world.host) == (None, ())
    run(world, key, "yield")
    assert world.stop(key, None) is ALLOW  # yielded
    s = world.session(key)
    write, audit = prompt_submitted(s, world.host)
    changed = frozenset({"yielded", "blocks", "lastActive"})
    assert write == session_write(s, 4, changed, yielded=False)  # the stop read 3
    cleared = {"yielded": True, "blocks": 0}
    assert audit == (
        AuditRecord(at(4), "prompt", {"yielded": False, "blocks": 0, "cleared": cleared}),
    )
    world.reader.apply_session(write, audit)
    assert world.stop(key, None).decision == "block"
    write, audit = prompt_submitted(world.session(key), world.host)
    assert write is not None and write.session.blocks == 0
    cleared = {"yielded": False, "blocks": 1}
    assert audit == (
        AuditRecord(at(6), "prompt", {"yielded": False, "blocks": 0, "cleared": cleared}),
    )
