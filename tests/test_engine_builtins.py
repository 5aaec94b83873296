"""The built-in events in process, exactly (engine/builtins.py, enter.resume_idle, moves.py):
pause runs the exit lists and keeps the slot, yield keeps the instance, unmatched interrupts
the held instance into the fallback machine and pauses one interrupted before, and resume
(from idle, or from the fallback state) returns to a slot that may have gone stale. The same
events end to end, as snapshots: test_builtins.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.engine_machines import STEPS
from helpers.engine_worlds import (
    FALLBACK,
    Scripted,
    calls,
    dev_world,
    fired,
    idle_world,
    lines,
    machines_world,
    refused,
    try_fire,
)
from helpers.memory_world import World, write_project

from smllm.engine.host import CommandResult
from smllm.engine.records import AuditRecord, Instance, Place
from smllm.machine.configs.config import load_configs
from smllm.machine.model import IdlePrompt
from smllm.text.block import render


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


def steps_at_a(tmp_path: Path) -> tuple[Scripted, str]:
    world = machines_world(tmp_path, STEPS, dirs=("sub",))
    key = world.new_session().key
    fired(world, key, "enter", ("stateMachine", "steps"), ("jobId", "J-1"))
    calls(world)
    return world, key


def interrupted(world: Scripted) -> tuple[str, Instance]:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    (inst,) = world.reader.instances.values()
    return key, inst


# --- builtins.pause -------------------------------------------------------------------------------


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


def test_pause_keeps_the_slot_and_audits_the_event(tmp_path: Path) -> None:
    world = idle_world(tmp_path, IdlePrompt("Idle.", None, ""))
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    slot = world.session(key).interrupted
    assert slot is not None
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    out = world.fire(key, "pause").committed
    assert out.session is not None and out.session.session.interrupted == slot
    detail = {
        "event": "pause",
        "source": "agent",
        "machine": "fallback",
        "label": "T-1",
        "from": "WORK",
        "to": "WORK",
    }
    assert [(a.kind, a.detail) for a in out.audit] == [("event", detail)]
    # entering the slot's instance empties the slot
    out = world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1")).committed
    assert out.ok and out.session is not None
    assert out.session.session.interrupted is None
    assert out.session.session.holding == slot


# --- builtins.do_yield ----------------------------------------------------------------------------


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


# --- builtins.unmatched and _interrupt ------------------------------------------------------------


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


# --- builtins.resume_fallback ---------------------------------------------------------------------


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


def test_resume_to_a_gone_state_with_no_entry_points(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    world.fire(key, "unmatched")
    found = world.reader.find("fallback", "T-1")
    assert found is not None
    world.reader.instances[found.id] = found._replace(resume_state="GONE")
    m = world.loaded.machines["fallback"]
    shut = m._replace(states={n: s._replace(entry_point=False) for n, s in m.states.items()})
    world.loaded = world.loaded._replace(machines={**world.loaded.machines, "fallback": shut})
    out = try_fire(world, key, "resume")
    assert out.reply.error == (
        "the interrupted state GONE no longer exists; leave with one of this state's events, "
        "or pause and enter with a state: none"
    )


def test_resume_is_offered_only_in_the_fallback_state(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    found = world.reader.find("fallback", "T-1")
    assert found is not None
    world.reader.instances[found.id] = found._replace(resume_state="WORK")
    out = try_fire(world, key, "resume")
    assert refused(out) == "resume is not offered here (offered: done, yield, pause, unmatched)"


def test_leaving_the_fallback_state_by_an_event_forgets_the_resume_state(tmp_path: Path) -> None:
    world = idle_world(tmp_path, IdlePrompt("Idle.", None, ""))
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    world.fire(key, "unmatched")
    out = world.fire(key, "handled").committed
    (write,) = out.instances
    assert (write.instance.state, write.instance.resume_state) == ("WORK", None)


# --- enter.resume_idle ----------------------------------------------------------------------------


def test_resume_a_slot_whose_state_is_gone(world: Scripted) -> None:
    key, inst = interrupted(world)
    world.reader.instances[inst.id] = inst._replace(state="GONE")
    out = try_fire(world, key, "resume")
    assert (out.ok, out.instances, out.session) == (False, (), None)
    assert lines(out.reply)[1:3] == [
        f"session {key} · idle",
        "error: saved state GONE no longer exists. Fire enter with stateMachine dev, issueId "
        "GH-1, state: one of PLAN, WORK, DONE",
    ]


def test_resume_a_slot_of_a_machine_no_longer_configured(world: Scripted, tmp_path: Path) -> None:
    key, _inst = interrupted(world)
    _cwd, config = write_project(tmp_path / "other", FALLBACK)
    other = World(load_configs((config,)), world.host, cwd=world.cwd, reader=world.reader)
    out = try_fire(other, key, "resume")
    assert (out.ok, out.instances, out.session) == (False, (), None)
    assert lines(out.reply)[2] == (
        "error: state machine dev is not configured (its file might have errors); fix the "
        "config, then fire any event: the session goes on where it was"
    )


@pytest.mark.parametrize("change", ["paused", "missing", "moved"])
def test_resume_a_stale_slot_empties_it(world: Scripted, change: str) -> None:
    key, inst = interrupted(world)
    s = world.session(key)
    if change == "paused":
        world.reader.instances[inst.id] = inst._replace(status="paused", holder=None)
    elif change == "missing":
        del world.reader.instances[inst.id]
    else:
        world.reader.instances[inst.id] = inst._replace(holder="sm-other")
    out = try_fire(world, key, "resume")
    assert out.ok is False and out.instances == ()
    assert out.session is not None
    assert out.session.session == s._replace(
        interrupted=None, version=s.version + 1, last_active=out.session.session.last_active
    )
    assert out.session.changes == frozenset({"interrupted", "lastActive"})
    assert out.session.expected_holding is None
    message = {
        "paused": "the interrupted instance is no longer interrupted",
        "missing": "the interrupted instance is no longer interrupted",
        "moved": "GH-1 moved to session sm-other",
    }[change]
    assert lines(out.reply)[2] == f"error: {message}"
    assert "- resume:" not in render(out.reply)


def test_resume_from_idle_arrives_back(world: Scripted) -> None:
    key, inst = interrupted(world)
    out = try_fire(world, key, "resume")
    (write,) = out.instances
    assert out.ok and (write.instance.status, write.instance.state) == ("active", "PLAN")
    assert out.session.session.interrupted is None
    assert out.session.session.holding == inst.place
    assert lines(out.reply)[1] == f"session {key} · dev › PLAN (visit 2) · issue GH-1"


def test_resume_from_idle_runs_the_entry_lists(tmp_path: Path) -> None:
    world = machines_world(tmp_path, STEPS, dirs=("sub",))
    key = world.new_session().key
    fired(world, key, "enter", ("stateMachine", "steps"), ("jobId", "J-1"))
    world.fire(key, "unmatched")
    calls(world)
    record, _text = fired(world, key, "resume")
    assert record.arrival == "resume" and record.params == {}
    assert calls(world) == [
        ("shared before entry", "", "A", ">A", "J-1"),
        ("a entry 0", "", "A", ">A", "J-1"),
        ("a entry 1", "", "A", ">A", "J-1"),
    ]
    assert world.session(key).interrupted is None
    assert world.session(key).holding == Place("steps", "i-yrd6z1")
