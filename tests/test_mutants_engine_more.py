"""Still more of the engine asserted exactly, for mutants that scripts/mutation found
surviving in src/smllm/engine/ (issue 12 §4): a session's recovery after a call ended between
its two commits (engine/recover.py), and every check and case of enter (engine/enter.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost

from smllm.engine.fire import fire
from smllm.engine.records import (
    AuditRecord,
    Instance,
    Place,
    Session,
    SessionWrite,
)
from smllm.engine.recover import recovery
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

HERE = Path(__file__).resolve().parent
FALLBACK = HERE / "machines" / "fallback.smllm.yaml"
T0 = "2026-01-01T00:00:00.000000Z"
AT = "2026-01-02T03:04:05.000006Z"
Scripted = World[ScriptedHost]


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def try_fire(world: Scripted, key: str | None, event: str, *params: tuple[str, Any]) -> Any:
    return fire(world.loaded, world.call(key, event, *params), world.reader, world.host)


def lines(reply: Any) -> list[str]:
    return render(reply).split("\n")


def inst(**changes: Any) -> Instance:
    i = Instance("i-1", "dev", "GH-1", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T0, T0)
    return i._replace(**changes)


def sess(**changes: Any) -> Session:
    s = Session("k", "none", None, "/p", ("c",), None, None, False, 0, 3, T0, T0)
    return s._replace(**changes)


# --- recover.recovery -------------------------------------------------------------------------

_ENDED = ": a call ended between saving the instance and the session"


class Clock:
    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> str:
        self.reads += 1
        return AT


def recover(world: Scripted, s: Session, *held: Instance) -> Any:
    clock = Clock()
    found = recovery(world.loaded, s, list(held), clock)
    assert clock.reads == (0 if found is None else 1)
    return found


def test_recovery_takes_back_an_active_instance(world: Scripted) -> None:
    s = sess()
    sw, audit = recover(world, s, inst())
    new = s._replace(holding=Place("dev", "i-1"), version=4, last_active=AT)
    assert sw == SessionWrite(new, False, None, frozenset({"holding", "lastActive"}))
    message = "issue GH-1 is held again" + _ENDED
    assert audit == (AuditRecord(AT, "moved", {"message": message}),)


def test_recovery_of_a_resume_that_committed_empties_the_slot(world: Scripted) -> None:
    s = sess(interrupted=Place("dev", "i-1"))
    sw, _audit = recover(world, s, inst())
    new = s._replace(holding=Place("dev", "i-1"), interrupted=None, version=4, last_active=AT)
    changes = frozenset({"holding", "interrupted", "lastActive"})
    assert sw == SessionWrite(new, False, None, changes)
    # a slot holding another instance stays
    other = sess(interrupted=Place("dev", "i-9"))
    sw, _audit = recover(world, other, inst())
    assert sw.session.interrupted == Place("dev", "i-9")
    assert sw.changes == frozenset({"holding", "lastActive"})


def test_recovery_refills_an_empty_slot(world: Scripted) -> None:
    s = sess()
    sw, audit = recover(world, s, inst(status="interrupted", machine="gone"))
    new = s._replace(interrupted=Place("gone", "i-1"), version=4, last_active=AT)
    assert sw == SessionWrite(new, False, None, frozenset({"interrupted", "lastActive"}))
    # a machine no longer configured names its instance "instance"
    message = "instance GH-1 is interrupted again" + _ENDED
    assert audit == (AuditRecord(AT, "moved", {"message": message}),)


def test_recovery_of_both(world: Scripted) -> None:
    s = sess()
    held = (inst(), inst(id="i-2", ref=None, status="interrupted", machine="fallback"))
    sw, audit = recover(world, s, *held)
    new = s._replace(
        holding=Place("dev", "i-1"),
        interrupted=Place("fallback", "i-2"),
        version=4,
        last_active=AT,
    )
    changes = frozenset({"holding", "interrupted", "lastActive"})
    assert sw == SessionWrite(new, False, None, changes)
    kind = world.loaded.machines["fallback"].kind
    message = f"issue GH-1 is held again; {kind} i-2 is interrupted again" + _ENDED
    assert audit == (AuditRecord(AT, "moved", {"message": message}),)


def test_recovery_finds_nothing_to_change(world: Scripted) -> None:
    # the first of each kind held by the session counts; others' and paused ones don't
    assert recover(world, sess()) is None
    assert recover(world, sess(), inst(holder="k2")) is None
    assert recover(world, sess(), inst(status="interrupted", holder="k2")) is None
    assert recover(world, sess(), inst(status="paused")) is None
    assert recover(world, sess(), inst(status="completed")) is None
    # a session that holds one already, or an interrupted one beside a full slot
    assert recover(world, sess(holding=Place("dev", "i-5")), inst()) is None
    full = sess(interrupted=Place("dev", "i-5"))
    assert recover(world, full, inst(status="interrupted")) is None


def test_recovery_picks_the_first_held_by_the_session(world: Scripted) -> None:
    held = (
        inst(id="i-0", holder="k2"),
        inst(id="i-1", status="interrupted", holder="k2"),
        inst(id="i-2", status="paused"),
        inst(id="i-3"),
        inst(id="i-4", status="interrupted"),
        inst(id="i-5"),
        inst(id="i-6", status="interrupted"),
    )
    sw, _audit = recover(world, sess(), *held)
    assert sw.session.holding == Place("dev", "i-3")
    assert sw.session.interrupted == Place("dev", "i-4")


# --- enter.enter ------------------------------------------------------------------------------

#: every event fired by the host only (engine.md §5.1 check 4)
GATE = """\
id: gate
description: Driven by the host.
initial: WAIT
meta:
  smllm: 1
  events:
    built: { description: The build finished., source: host }
    failed: { description: The build failed., source: host }
states:
  WAIT:
    meta: { entryPoint: true }
    on:
      built: DONE
      failed: DONE
  DONE:
    type: final
"""

#: no entry point; commands that show what a call's actions see
PROBE = """\
id: probe
description: No entry points, and commands everywhere.
initial: A
meta:
  smllm: 1
  instance: { kind: job, ref: { param: jobId } }
  events:
    go: { description: Go on. }
states:
  A:
    entry: { type: command, params: { run: "probe enter A" } }
    exit: { type: command, params: { run: "probe exit A" } }
    on:
      go: B
  B:
    entry: { type: command, params: { run: "probe enter B" } }
    on:
      go: C
  C:
    type: final
"""


def machines_world(
    tmp_path: Path, *texts: str, files: tuple[Path, ...] = (), dirs: tuple[str, ...] = ()
) -> Scripted:
    """A world over the machines of `texts` (YAML) and `files`, in that order; `dirs`: folders
    made beside them."""
    src = tmp_path / "src"
    src.mkdir(parents=True)
    paths = []
    for text in texts:
        path = src / (text.split("\n", 1)[0].removeprefix("id: ") + ".smllm.yaml")
        path.write_text(text)
        paths.append(path)
    cwd, config = write_project(tmp_path, *paths, *files)
    for name in dirs:
        (Path(config).parent / name).mkdir()
    loaded = load_configs((config,))
    assert [f for f in loaded.findings if f.level == "error"] == [], loaded.findings
    return World(loaded, ScriptedHost(seed=1), cwd=cwd)


def refused(out: Any) -> str:
    """The error of a refusal that wrote nothing, after checking that it wrote nothing."""
    assert (out.ok, out.instances, out.session, out.audit) == (False, (), None, ())
    text = render(out.reply)
    errors = [line.removeprefix("error: ") for line in text.split("\n") if line.startswith("error")]
    assert len(errors) == 1, text
    return errors[0]


ENTER_REFUSALS = [
    (
        (("stateMachine", "dev"), ("stateMachine", "dev")),
        "enter got param stateMachine more than once",
    ),
    ((), "enter needs param stateMachine"),
    ((("stateMachine", None),), "enter needs param stateMachine"),
    ((("stateMachine", ""),), "enter needs param stateMachine"),
    ((("stateMachine", 3),), "enter param stateMachine must be a string"),
    (
        (("stateMachine", "nope"),),
        'enter param stateMachine must be one of: dev, fallback (got "nope")',
    ),
    (
        (("stateMachine", "dev"), ("size", "small")),
        "enter has no param size for dev (params: stateMachine, issueId, state)",
    ),
    ((("stateMachine", "dev"), ("issueId", 12)), "enter param issueId must be a string"),
    ((("stateMachine", "dev"), ("state", 12)), "enter param state must be a string"),
    (
        (("stateMachine", "dev"), ("issueId", "gh-12")),
        'enter param issueId must match ^GH-[0-9]+$ (got "gh-12")',
    ),
    (
        (("stateMachine", "dev"), ("state", "WORK")),
        "WORK is not an entry point of dev (entry points: PLAN)",
    ),
    (
        (("stateMachine", "dev"), ("issueId", "GH-1"), ("state", "NOPE")),
        "NOPE is not an entry point of dev (entry points: PLAN)",
    ),
]


@pytest.mark.parametrize(("params", "error"), ENTER_REFUSALS)
def test_enter_refusals(world: Scripted, params: tuple[tuple[str, Any], ...], error: str) -> None:
    key = world.new_session().key
    for k in (key, None):
        out = try_fire(world, k, "enter", *params)
        assert refused(out) == error
        assert lines(out.reply)[1] == (f"session {k} · idle" if k else "no session · idle")
        assert "- enter: " in render(out.reply)


def test_enter_with_no_machine_configured(world: Scripted) -> None:
    from smllm.engine.context import begin
    from smllm.engine.enter import enter as do_enter

    empty = world.loaded._replace(machines={})
    call = world.call(None, "enter", ("stateMachine", "dev"))
    out = do_enter(begin(empty, call, world.reader, world.host), {})
    assert refused(out) == (
        "enter param stateMachine must name a configured state machine, and none is "
        'configured (got "dev"); add one with smllm new ID --write'
    )
    # agent-text.md §9: with no config at all, `smllm init` first
    no_config = world.loaded._replace(machines={}, configs=())
    out = do_enter(begin(no_config, call, world.reader, world.host), {})
    assert refused(out) == (
        "enter param stateMachine must name a configured state machine, and none is "
        'configured (got "dev"); add one with smllm init, then smllm new ID --write'
    )


def test_enter_a_machine_only_the_host_drives(tmp_path: Path) -> None:
    world = machines_world(tmp_path, GATE)
    call = world.call(None, "enter", ("stateMachine", "gate"))
    out = fire(world.loaded, call, world.reader, world.host)
    assert refused(out) == (
        "state machine gate needs a host to drive it: only the host fires its events built, failed"
    )
    host_call = call._replace(source="host")
    out = fire(world.loaded, host_call, world.reader, world.host)
    assert out.ok and out.instances[0].instance.state == "WAIT"


def test_enter_with_no_entry_point(tmp_path: Path) -> None:
    world = machines_world(tmp_path, PROBE)
    out = try_fire(world, None, "enter", ("stateMachine", "probe"), ("state", "B"))
    assert refused(out) == "B is not an entry point of probe (entry points: none)"
    # the initial state is entered even though it isn't an entry point
    out = try_fire(world, None, "enter", ("stateMachine", "probe"), ("state", "A"))
    assert out.ok and out.instances[0].instance.state == "A"


def store(world: Scripted, **changes: Any) -> Instance:
    """An instance put straight into the world's reader (version 3, paused by default)."""
    i = inst(**{"status": "paused", "holder": None, "version": 3, **changes})
    world.reader.instances[i.id] = i
    return i


def entered_again(world: Scripted, key: str | None, *params: tuple[str, Any]) -> Any:
    """The accepted enter's instance write; its reply's lines after the header."""
    out = try_fire(world, key, "enter", *params)
    assert out.ok, render(out.reply)
    (write,) = out.instances
    return write, lines(out.reply)[2:]


DEV_GH1 = (("stateMachine", "dev"), ("issueId", "GH-1"))


def test_enter_a_completed_instance(world: Scripted, tmp_path: Path) -> None:
    store(world, state="DONE", status="completed", visits={"PLAN": 1, "WORK": 1, "DONE": 1})
    key = world.new_session().key
    out = try_fire(world, key, "enter", *DEV_GH1)
    assert refused(out) == "issue GH-1 is completed. To reopen it, fire enter with state: PLAN"
    out = try_fire(world, key, "enter", *DEV_GH1, ("state", "WORK"))
    assert refused(out) == "WORK is not an entry point of dev (entry points: PLAN)"
    write, rest = entered_again(world, key, *DEV_GH1, ("state", "PLAN"))
    assert write.history.arrival == "enter (reopened from DONE)"
    assert write.history.params == {"stateMachine": "dev", "issueId": "GH-1", "state": "PLAN"}
    assert write.history.trace == ("Reopened issue GH-1 at PLAN.",)
    assert (write.instance.state, write.instance.status) == ("PLAN", "active")
    assert write.instance.visits == {"PLAN": 2, "WORK": 1, "DONE": 1}
    assert rest[:3] == [
        "Arrived by: enter (reopened from DONE)",
        'Params: stateMachine = "dev", issueId = "GH-1", state = "PLAN"',
        "Reopened issue GH-1 at PLAN.",
    ]
    # a machine with no entry point can't reopen one
    other = machines_world(tmp_path / "other", PROBE)
    store(other, machine="probe", ref="J-1", state="C", status="completed")
    out = try_fire(other, None, "enter", ("stateMachine", "probe"), ("jobId", "J-1"))
    assert refused(out) == "job J-1 is completed, and no state is an entry point to reopen it at"


def test_enter_a_completed_instance_with_two_entry_points(tmp_path: Path) -> None:
    world = machines_world(tmp_path, files=(HERE / "machines" / "final.smllm.yaml",))
    store(world, machine="final", ref="a.md", state="CLOSED", status="completed")
    out = try_fire(world, None, "enter", ("stateMachine", "final"), ("docPath", "a.md"))
    assert refused(out) == (
        "doc a.md is completed. To reopen it, fire enter with state: one of OPEN, REVIEW"
    )
    # a new instance may start at any entry point
    write, _rest = entered_again(world, None, ("stateMachine", "final"), ("state", "REVIEW"))
    assert write.instance.state == "REVIEW" and write.history.arrival == "enter (new doc)"


def test_enter_an_instance_whose_saved_state_is_gone(world: Scripted) -> None:
    store(world, state="GONE")
    key = world.new_session().key
    out = try_fire(world, key, "enter", *DEV_GH1)
    assert refused(out) == (
        "saved state GONE of issue GH-1 no longer exists. Fire enter with state: "
        "one of PLAN, WORK, DONE"
    )
    out = try_fire(world, key, "enter", *DEV_GH1, ("state", "NOPE"))
    assert refused(out) == "dev has no state NOPE"
    # any state repairs it, an entry point or not
    write, rest = entered_again(world, key, *DEV_GH1, ("state", "WORK"))
    assert write.history.arrival == "enter (saved state GONE no longer exists)"
    assert (write.instance.state, write.history.from_state) == ("WORK", "GONE")
    assert rest[0] == "Arrived by: enter (saved state GONE no longer exists)"


def test_enter_continues_or_jumps(world: Scripted) -> None:
    store(world, state="WORK", visits={"PLAN": 1, "WORK": 1})
    key = world.new_session().key
    write, rest = entered_again(world, key, *DEV_GH1)
    assert write.history.arrival == "enter" and write.instance.state == "WORK"
    assert write.history.trace == ()  # a paused instance is no takeover
    assert rest[:2] == ["Arrived by: enter", 'Params: stateMachine = "dev", issueId = "GH-1"']
    out = try_fire(world, key, "enter", *DEV_GH1, ("state", "DONE"))
    assert refused(out) == "DONE is not an entry point of dev (entry points: PLAN)"
    write, rest = entered_again(world, key, *DEV_GH1, ("state", "PLAN"))
    assert write.history.arrival == "enter (jump from WORK)"
    assert (write.instance.state, write.instance.visits) == ("PLAN", {"PLAN": 2, "WORK": 1})


def test_enter_takes_over_from_another_session(world: Scripted) -> None:
    seen = "2026-01-01T05:06:07.000000Z"
    store(world, status="interrupted", holder="sm-other", holder_seen=seen)
    key = world.new_session().key
    write, rest = entered_again(world, key, *DEV_GH1)
    took = "Took over from session sm-other (last active 2026-01-01 05:06 UTC)"
    assert write.history.trace == (took,)
    assert rest[2] == took
    # never seen: its last update stands in
    store(
        world,
        id="i-2",
        ref="GH-2",
        status="active",
        holder="sm-x",
        updated="2026-01-01T07:08:09.000000Z",
    )
    write, _rest = entered_again(world, key, ("stateMachine", "dev"), ("issueId", "GH-2"))
    assert write.history.trace == (
        "Took over from session sm-x (last active 2026-01-01 07:08 UTC)",
    )


def test_enter_an_instance_the_session_holds_is_no_takeover(world: Scripted) -> None:
    key = world.new_session().key
    store(world, status="interrupted", holder=key)
    write, _rest = entered_again(world, key, *DEV_GH1)
    assert write.history.trace == ()
    assert write.instance.holder == key


def test_enter_without_a_ref_starts_a_new_instance(world: Scripted) -> None:
    store(world, ref=None)  # a paused instance without a ref isn't continued by a refless enter
    write, _rest = entered_again(world, None, ("stateMachine", "dev"), ("issueId", ""))
    assert write.expected == 0 and write.instance.id != "i-1"
    assert write.instance.ref is None
    assert write.history.params == {"stateMachine": "dev"}


def test_enter_keeps_the_resume_state_only_in_the_fallback(world: Scripted) -> None:
    fb = (("stateMachine", "fallback"), ("taskId", "T-1"))
    store(world, machine="fallback", ref="T-1", state="ASIDE", resume_state="WORK")
    key = world.new_session().key
    write, _rest = entered_again(world, key, *fb)
    assert (write.instance.state, write.instance.resume_state) == ("ASIDE", "WORK")
    store(world, machine="fallback", ref="T-1", state="ASIDE", resume_state="WORK", version=9)
    write, _rest = entered_again(world, key, *fb, ("state", "WORK"))
    assert (write.instance.state, write.instance.resume_state) == ("WORK", None)


def test_enter_runs_entry_commands_with_the_call_s_params(tmp_path: Path) -> None:
    world = machines_world(tmp_path, PROBE)
    store(world, machine="probe", ref="J-1", state="B")
    key = world.new_session().key
    _write, _rest = entered_again(world, key, ("stateMachine", "probe"), ("jobId", "J-1"))
    (called,) = world.host.calls
    assert called.command.run == "probe enter B"
    assert called.env == {
        "SMLLM_SESSION": key,
        "SMLLM_MACHINE": "probe",
        "SMLLM_INSTANCE": "i-1",
        "SMLLM_REF": "J-1",
        "SMLLM_EVENT": "enter",
        "SMLLM_STATE": "B",
        "SMLLM_FROM": "",
        "SMLLM_TO": "B",
        "SMLLM_PARAM_STATE_MACHINE": "probe",
        "SMLLM_PARAM_JOB_ID": "J-1",
    }


#: a fallback state reached by an `always` transition from an entry point
ROUTED = """\
id: routed
description: An entry point that passes into the fallback state.
initial: WORK
meta:
  smllm: 1
  events:
    done: { description: Finish. }
    handled: { description: Back to work. }
states:
  WORK:
    meta: { entryPoint: true }
    on:
      done: DONE
  ROUTE:
    meta: { entryPoint: true }
    always: ASIDE
  ASIDE:
    meta: { fallback: true }
    on:
      handled: WORK
  DONE:
    type: final
"""


def test_enter_through_to_the_fallback_forgets_the_resume_state(tmp_path: Path) -> None:
    world = machines_world(tmp_path, ROUTED, files=(HERE / "machines" / "final.smllm.yaml",))
    store(world, machine="routed", ref="R-1", state="ASIDE", resume_state="WORK")
    params = (("stateMachine", "routed"), ("ref", "R-1"), ("state", "ROUTE"))
    write, _rest = entered_again(world, None, *params)
    assert write.history.arrival == "enter (jump from ASIDE) via ROUTE"
    assert (write.instance.state, write.instance.resume_state) == ("ASIDE", None)
    out = try_fire(world, None, "enter", ("stateMachine", "final"), ("state", "CLOSED"))
    assert refused(out) == "CLOSED is not an entry point of final (entry points: OPEN, REVIEW)"
