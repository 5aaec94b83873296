"""engine.md §5.1 `enter`: every check and every case, end to end with exact replies as
snapshots; then in process (engine/enter.py) with each refusal's text, each instance write and
each reply's lines exact: entering a completed instance, one whose saved state is gone, one
held by another session, the resume state in the fallback, and entry commands' params."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.engine_worlds import (
    Scripted,
    dev_world,
    inst,
    lines,
    machines_world,
    refused,
    try_fire,
)
from helpers.scenario import Scenario

from smllm.engine.fire import fire
from smllm.engine.records import Instance
from smllm.text.block import render

HERE = Path(__file__).resolve().parent


def test_enter_refusals_in_idle(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "final")
    key = sc.session()
    before = sc.rows()
    sc.fire(key, "enter", ("stateMachine", "dev"), ("stateMachine", "dev"))
    sc.fire(key, "enter")
    sc.fire(key, "enter", stateMachine=3)
    sc.fire(key, "enter", stateMachine="nope")
    sc.fire(key, "enter", stateMachine="dev", size="small")
    sc.fire(key, "enter", stateMachine="dev", issueId=12)
    sc.fire(key, "enter", stateMachine="dev", issueId="gh-12")
    sc.fire(key, "enter", stateMachine="dev", state="WORK")
    sc.fire(key, "enter", stateMachine="dev", state="NOPE")
    sc.fire(key, "planned", size="small")
    sc.fire(key, "resume")
    sc.fire(key, "listPaused")
    assert sc.rows() == before  # a refused event changes nothing
    sc.check_snapshot("enter_refusals")


def test_enter_new_without_ref_and_initial_state(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "reenter")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="dev", state="PLAN")
    inst = sc.instance("i-000001")
    assert inst["ref"] is None and inst["state"] == "PLAN" and inst["visits"] == {"PLAN": 1}
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="reenter", state="B")
    sc.check_snapshot("enter_new")


def test_continue_jump_reopen_repair(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "final")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="final", docPath="a.md")
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="REVIEW")  # jump
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="REVIEW")  # jump to self
    sc.fire(key, "close")
    before = sc.rows()
    sc.fire(key, "enter", stateMachine="final", docPath="a.md")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="CLOSED")
    assert sc.rows() == before
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="OPEN")  # reopen
    inst = sc.instance("a.md")
    assert inst["status"] == "active" and inst["visits"] == {"OPEN": 2, "REVIEW": 2, "CLOSED": 1}
    sc.fire(key, "pause")
    sc.edit("final.smllm.yaml", "  OPEN:", "  EDIT:")
    sc.edit("final.smllm.yaml", "initial: OPEN", "initial: EDIT")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="NOPE")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="CLOSED")  # repair
    sc.check_snapshot("enter_continue_jump_reopen_repair")


def test_reopen_refusals(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "visits")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    sc.fire(key, "planned", size="small")
    (tmp_path / "PLAN.md").write_text("plan\n")
    sc.fire(key, "planned", size="small")
    sc.fire(key, "done")
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")  # one entry point
    sc.fire(key, "enter", stateMachine="visits")
    sc.fire(key, "retry")
    sc.fire(key, "retry")
    sc.edit("visits.smllm.yaml", "meta: { entryPoint: true }", "meta: { entryPoint: false }")
    sc.fire(key, "enter", stateMachine="visits", ref="i-000002")  # no entry point at all
    sc.check_snapshot("enter_reopen_refusals")


def test_takeover_and_moved(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev")
    first = sc.session()
    second = sc.session()
    sc.fire(first, "enter", stateMachine="dev", issueId="GH-5")
    sc.fire(second, "enter", stateMachine="dev", issueId="GH-5")
    assert sc.instance("GH-5")["holder"] == second
    sc.view(first)  # a view shows the move but writes nothing
    sc.fire(first, "yield")  # the event is refused, the session goes to idle
    sc.fire(first, "yield")
    sc.check_snapshot("enter_takeover")


def test_keyless_enter(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev")
    before = sc.rows()
    sc.fire(None, "enter", stateMachine="dev", issueId="bad")
    assert sc.rows() == before  # a refused keyless enter saves nothing
    result = sc.fire(None, "enter", stateMachine="dev", issueId="GH-3")
    assert result.session is not None and result.session.harness == "none"
    sc.call_error(None, "yield")
    sc.call_error("sm-zzzzzz", "yield")
    sc.check_snapshot("enter_keyless")


def test_host_only_machine(tmp_path: Path, env: dict[str, str]) -> None:
    machine = tmp_path / "hosted.smllm.yaml"
    machine.write_text("""\
id: hosted
initial: WAIT
meta:
  smllm: 1
  events:
    built: { description: The build finished., source: host }
states:
  WAIT:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Wait for the build." } }
    on:
      built: DONE
  DONE:
    type: final
""")
    sc = Scenario(tmp_path / "p", machine)
    key = sc.session()
    sc.fire(key, "enter", stateMachine="hosted")
    sc.fire(None, "enter", stateMachine="hosted", host=True)
    host_key = sc.app.user.sessions()[0].key
    sc.fire(host_key, "built", host=True)
    sc.check_snapshot("enter_host_only")


def test_empty_values(tmp_path: Path, env: dict[str, str]) -> None:
    named = tmp_path / "named.smllm.yaml"
    named.write_text("""\
id: named
initial: NEW
meta:
  smllm: 1
  events: { name: { description: Name the instance. } }
states:
  NEW:
    meta: { entryPoint: true }
    on:
      name: { target: DONE, actions: setRef }
  DONE: { type: final }
""")
    sc = Scenario(tmp_path / "p", "fallback", named)
    key = sc.session()
    result = sc.fire(key, "enter", stateMachine="fallback", taskId="", state="")
    assert result.ok and sc.instance("i-000001")["ref"] is None  # "" counts as absent
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="named")
    before = sc.rows()
    sc.fire(key, "name", ref="")
    assert sc.rows() == before
    sc.fire(key, "name", ref="first")
    sc.check_snapshot("enter_empty_values")


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


# --- in process: every check and case of enter.enter, exactly -------------------------------------


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
