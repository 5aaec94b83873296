"""More of the engine asserted exactly, for mutants that scripts/mutation found surviving in
src/smllm/engine/ (issue 12 §4): the built-in events (pause, yield, unmatched, resume in the
fallback state; engine/builtins.py) and a machine event's checks (engine/fire.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost
from test_mutants_engine_more import HERE, Scripted, lines, machines_world, refused, try_fire
from test_mutants_engine_more_steps import STEPS, calls, fired, fix_world

from smllm.engine.host import CommandResult
from smllm.engine.records import AuditRecord, Place
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

FALLBACK = HERE / "machines" / "fallback.smllm.yaml"


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def steps_at_a(tmp_path: Path) -> tuple[Scripted, str]:
    world = machines_world(tmp_path, STEPS, dirs=("sub",))
    key = world.new_session().key
    fired(world, key, "enter", ("stateMachine", "steps"), ("jobId", "J-1"))
    calls(world)
    return world, key


# --- builtins.pause ---------------------------------------------------------------------------


def test_pause_runs_the_exit_lists_toward_no_state(tmp_path: Path) -> None:
    world, key = steps_at_a(tmp_path)
    world.host.results.extend([CommandResult(True, ""), CommandResult(False, "exited 3")])
    out = world.fire(key, "pause").committed
    assert out.ok
    assert calls(world) == [
        ("shared before exit", "", "A", "A>", "J-1"),
        ("a exit", "", "A", "A>", "J-1"),
    ]
    (write,) = out.instances
    assert write.history.trace == (
        "Paused job J-1 at A.",
        "Action failed: A exit[0] command: exited 3",
    )
    assert (write.instance.status, write.instance.holder) == ("paused", None)
    assert lines(out.reply)[1:4] == [
        f"session {key} · idle",
        "Paused job J-1 at A.",
        "Action failed: A exit[0] command: exited 3",
    ]


def test_pause_shows_the_exit_prompts(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    out = world.fire(key, "pause").committed
    text = lines(out.reply)
    assert text[1:6] == [
        f"session {key} · idle",
        "Paused task T-1 at WORK.",
        "<instructions>",
        "Leaving WORK.",
        "</instructions>",
    ]


# --- builtins.do_yield ------------------------------------------------------------------------


def test_yield_keeps_the_slot_and_audits_the_event(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    slot = world.session(key).interrupted
    assert slot is not None
    out = world.fire(key, "yield", ("note", "the user")).committed
    assert out.ok and out.session is not None
    assert out.session.session.interrupted == slot
    assert out.session.session.yielded is True
    (write,) = out.instances
    assert write.history.params == {"note": "the user"}
    assert (write.history.from_state, write.history.to_state) == ("WORK", "WORK")
    detail = {
        "event": "yield",
        "source": "agent",
        "machine": "fallback",
        "label": "T-1",
        "from": "WORK",
        "to": "WORK",
    }
    assert out.audit == (AuditRecord(out.audit[0].at, "event", detail),)


# --- builtins.resume_fallback -----------------------------------------------------------------


def test_resume_to_a_state_that_is_gone(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    world.fire(key, "unmatched")
    inst = world.reader.find("fallback", "T-1")
    assert inst is not None and (inst.state, inst.resume_state) == ("ASIDE", "WORK")
    world.reader.instances[inst.id] = inst._replace(resume_state="GONE")
    out = try_fire(world, key, "resume")
    assert refused(out) == (
        "the interrupted state GONE no longer exists; leave with one of this state's events, "
        "or pause and enter with a state: WORK"
    )
    assert lines(out.reply)[1] == f"session {key} · fallback › ASIDE · task T-1"
    assert "- handled: Leave the aside state for work." in render(out.reply)


def test_resume_from_the_fallback_state(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    world.fire(key, "unmatched")
    out = world.fire(key, "resume").committed
    (write,) = out.instances
    assert write.history.arrival == "resume"
    assert (write.history.from_state, write.instance.state) == ("ASIDE", "WORK")
    assert write.instance.resume_state is None
    assert write.instance.visits == {"WORK": 2, "ASIDE": 1}
    assert lines(out.reply)[1:3] == [
        f"session {key} · fallback › WORK (visit 2) · task T-1",
        "Arrived by: resume",
    ]


# --- fire: a machine event's checks -----------------------------------------------------------


def test_an_agent_firing_a_host_event(tmp_path: Path) -> None:
    world, key, _folder = fix_world(tmp_path)
    out = world.fire(key, "enter", ("stateMachine", "fix"), ("bugId", "BUG-1"), ("state", "REPRO"))
    assert out.committed.ok
    inst = world.reader.find("fix", "BUG-1")
    assert inst is not None
    world.reader.instances[inst.id] = inst._replace(state="REVIEW")
    out = try_fire(world, key, "approved")
    assert refused(out) == (
        "approved is an event that only the host fires (offered: yield, pause, unmatched)"
    )
    assert lines(out.reply)[1] == f"session {key} · fix › REVIEW · bug BUG-1"
    call = world.call(key, "changesRequested", ("comments", [{"file": "a.py", "text": "no"}]))
    from smllm.engine.fire import fire

    out = fire(world.loaded, call._replace(source="host"), world.reader, world.host)
    assert out.ok and out.instances[0].instance.state == "FIX"
    bad = call._replace(source="host", params=(("comments", [{"file": "a.py"}]),))
    out = fire(world.loaded, bad, world.reader, world.host)
    assert refused(out).startswith("changesRequested param comments doesn't match its schema.")


def test_params_too_large_in_a_state(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]
    out = try_fire(world, key, "planned", ("size", deep))
    assert refused(out) == "planned params nest more than 64 levels deep"
    assert lines(out.reply)[1] == f"session {key} · dev › PLAN · issue GH-1"
    out = try_fire(world, key, "yield", ("note", 5))
    assert refused(out) == "yield param note must be a string"


def test_too_large_in_idle(world: Scripted) -> None:
    key = world.new_session().key
    out = try_fire(world, key, "enter", ("stateMachine", "x" * 70000))
    assert refused(out).startswith("enter params are too large (")
    assert lines(out.reply)[1] == f"session {key} · idle"


def test_no_transition_matched(world: Scripted) -> None:
    m = world.loaded.machines["dev"]
    plan = m.states["PLAN"]
    only = plan._replace(on={"planned": plan.on["planned"][:1]})
    loaded = world.loaded._replace(
        machines={**world.loaded.machines, "dev": m._replace(states={**m.states, "PLAN": only})}
    )
    other = World(loaded, world.host, cwd=world.cwd, reader=world.reader)
    key = other.new_session().key
    other.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    out = try_fire(other, key, "planned", ("size", "small"))
    assert refused(out) == "no transition of planned matched in PLAN; nothing changed"
    assert lines(out.reply)[1] == f"session {key} · dev › PLAN · issue GH-1"
    assert "- planned: Fire after you write the plan in PLAN.md." in render(out.reply)


# --- fire._ref_problem --------------------------------------------------------------------------


TAGGER = """\
id: tagger
description: setRef without a pattern.
initial: A
meta:
  smllm: 1
  instance: { kind: job, ref: { param: jobId } }
  events:
    tag:
      description: Tag the job.
      params: { type: object, properties: { jobId: { type: string } } }
states:
  A:
    meta: { entryPoint: true }
    on:
      tag: { target: A, actions: [setRef] }
"""


def test_set_ref_problems(tmp_path: Path) -> None:
    world = machines_world(tmp_path, TAGGER)
    key = world.new_session().key
    fired(world, key, "enter", ("stateMachine", "tagger"), ("jobId", "J-2"))
    fired(world, key, "pause")
    fired(world, key, "enter", ("stateMachine", "tagger"))
    (mine,) = [i for i in world.reader.instances.values() if i.ref is None]
    out = try_fire(world, key, "tag", ("jobId", ""))
    assert refused(out) == "tag param jobId can't be empty: it becomes the ref"
    out = try_fire(world, key, "tag", ("jobId", "J-2"))
    assert refused(out) == "another job of tagger already has ref J-2"
    out = try_fire(world, key, "tag", ("jobId", mine.id))  # its own id is no other's ref
    assert out.ok and out.instances[0].instance.ref == mine.id
    fired(world, key, "tag", ("jobId", "J-3"))
    assert world.reader.instances[mine.id].ref == "J-3"
    out = try_fire(world, key, "tag", ("jobId", "J-4"))
    assert refused(out) == f"job {mine.id} already has ref J-3, and smllm sets a ref only once"
    out = try_fire(world, key, "tag", ("jobId", "J-3"))  # the same ref again is no change
    assert out.ok and out.instances[0].instance.ref == "J-3"
    out = try_fire(world, key, "tag")
    assert out.ok and out.instances[0].instance.ref == "J-3"
    assert world.reader.instances[mine.id].place == Place("tagger", mine.id)


# --- rules.state_events: the events list of a state -------------------------------------------


def events_block(key: str, *items: str) -> list[str]:
    return [
        f'Fire one event: smllm({{ session: "{key}", event, params }})',
        "<events>",
        *items,
        "</events>",
        "</smllm>",
    ]


def test_the_events_lists_of_the_fallback_machine(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    out = try_fire(world, key, "nope")
    assert refused(out) == "nope is not offered here (offered: done, yield, pause, unmatched)"
    assert lines(out.reply)[3:] == events_block(
        key,
        "- done: Finish the task.",
        "- yield: Stop for now and stay in WORK.",
        "    note (optional): What you are waiting for.",
        "- pause: Put task T-1 aside and return to idle.",
        "- unmatched: The request fits none of these; handle it in ASIDE, then resume.",
    )
    world.fire(key, "unmatched")
    out = try_fire(world, key, "nope")
    assert refused(out) == (
        "nope is not offered here (offered: handled, resume, yield, pause, unmatched)"
    )
    assert lines(out.reply)[3:] == events_block(
        key,
        "- handled: Leave the aside state for work.",
        "- resume: Go back to task T-1 at WORK, which unmatched put aside.",
        "- yield: Stop for now and stay in ASIDE.",
        "    note (optional): What you are waiting for.",
        "- pause: Put task T-1 aside and return to idle.",
        "- unmatched: The request fits none of these; handle it from idle, then resume.",
    )


def test_a_machine_s_own_descriptions_of_the_built_ins(tmp_path: Path) -> None:
    world, key, _folder = fix_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "fix"), ("bugId", "BUG-1"), ("state", "REPRO"))
    out = try_fire(world, key, "nope")
    assert lines(out.reply)[3:] == events_block(
        key,
        "- reproduced: Fire after a test shows the bug.",
        "    test (required, pattern: ^tests/.+[.]py$): The test you added; it must fail now.",
        "- yield: Stop and wait for the person who reported the bug.",
        "    note (optional): What you are waiting for.",
        "- pause: Put bug BUG-1 aside and return to idle.",
        "- unmatched: The request fits none of these; handle it in ASIDE, then resume.",
    )
    out = try_fire(world, key, "reproduced", ("test", "t.py"))
    assert refused(out) == 'reproduced param test must match ^tests/.+[.]py$ (got "t.py")'
    out = try_fire(world, key, "reproduced", ("test", "tests/t.py"), ("size", 1))
    assert refused(out) == "reproduced has no param size (params: test)"


# --- builtins.unmatched and _interrupt ----------------------------------------------------------

ASIDE = """\
id: aside
description: Commands on the way to the fallback state and out of the machine.
initial: WORK
meta:
  smllm: 1
  instance: { kind: task, ref: { param: taskId } }
  events:
    handled: { description: Back to work. }
states:
  WORK:
    meta: { entryPoint: true }
    entry: { type: command, params: { run: "work entry" } }
    exit: { type: command, params: { run: "work exit" } }
  OTHER:
    meta: { entryPoint: true }
    on:
      handled: WORK
  ASIDE:
    meta: { fallback: true }
    entry: { type: command, params: { run: "aside entry" } }
    exit: { type: command, params: { run: "aside exit" } }
    on:
      handled: WORK
"""


def test_unmatched_into_the_fallback_runs_its_lists(tmp_path: Path) -> None:
    world = machines_world(tmp_path, ASIDE)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "aside"), ("taskId", "T-1"))
    assert calls(world) == [("work entry", "", "WORK", ">WORK", "T-1")]
    out = world.fire(key, "unmatched").committed
    assert out.ok and out.instances[0].instance.state == "ASIDE"
    assert calls(world) == [
        ("work exit", "", "WORK", "WORK>ASIDE", "T-1"),
        ("aside entry", "", "ASIDE", "WORK>ASIDE", "T-1"),
    ]
    # in the fallback state, unmatched goes to idle: the exit lists toward no state
    world.host.results.append(CommandResult(False, "exited 9"))
    out = world.fire(key, "unmatched").committed
    assert calls(world) == [("aside exit", "", "ASIDE", "ASIDE>", "T-1")]
    (write,) = out.instances
    assert write.history.trace == (
        "Interrupted task T-1 at ASIDE. Handle the request, then fire resume from idle.",
        "Action failed: ASIDE exit[0] command: exited 9",
    )
    assert lines(out.reply)[3] == "Action failed: ASIDE exit[0] command: exited 9"


def test_unmatched_pauses_the_previously_interrupted_instance(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    old = world.reader.find("dev", "GH-1")
    assert old is not None
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-2"))
    out = world.fire(key, "unmatched").committed
    note = "Paused the previously interrupted issue GH-1."
    paused, interrupted = out.instances
    assert (paused.instance.status, paused.instance.holder) == ("paused", None)
    assert paused.instance.version == old.version + 1 and paused.expected == old.version
    assert paused.history.event == "pause" and paused.history.trace == (note,)
    assert (paused.history.from_state, paused.history.to_state) == ("PLAN", "PLAN")
    assert (paused.history.session, paused.history.status) == (key, "paused")
    assert interrupted.instance.ref == "GH-2" and interrupted.instance.status == "interrupted"
    assert lines(out.reply)[2:4] == [
        note,
        "Interrupted issue GH-2 at PLAN. Handle the request, then fire resume from idle.",
    ]
    assert out.session is not None
    assert out.session.session.interrupted == interrupted.instance.place


def test_unmatched_leaves_a_slot_instance_another_session_interrupted(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    other = world.new_session().key
    world.fire(other, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(other, "unmatched")  # GH-1 interrupted again, by the other session
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-2"))
    out = world.fire(key, "unmatched").committed
    (write,) = out.instances
    assert write.instance.ref == "GH-2"
    assert lines(out.reply)[2].startswith("Interrupted issue GH-2 at PLAN.")


def test_resume_from_the_fallback_runs_its_lists(tmp_path: Path) -> None:
    world = machines_world(tmp_path, ASIDE)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "aside"), ("taskId", "T-1"))
    world.fire(key, "unmatched")
    calls(world)
    out = world.fire(key, "resume").committed
    assert out.ok and out.instances[0].instance.state == "WORK"
    assert calls(world) == [
        ("aside exit", "", "ASIDE", "ASIDE>WORK", "T-1"),
        ("work entry", "", "WORK", "ASIDE>WORK", "T-1"),
    ]
    world.fire(key, "unmatched")
    inst = world.reader.find("aside", "T-1")
    assert inst is not None
    world.reader.instances[inst.id] = inst._replace(resume_state="GONE")
    out = try_fire(world, key, "resume")
    assert refused(out).endswith("or pause and enter with a state: WORK, OTHER")
