"""More of the engine asserted exactly, for mutants that scripts/mutation found surviving in
src/smllm/engine/ (issue 12 §4): the idle list's slot and resume item, the status of a session
whose instances changed, what a new session and a new instance get, and resume from idle with
its commands (engine/idle.py, status.py, context.py, enter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost
from test_mutants_engine_more import (
    FALLBACK,
    Scripted,
    inst,
    lines,
    machines_world,
    try_fire,
)
from test_mutants_engine_more_steps import STEPS, calls, fired

from smllm.engine.fire import fire
from smllm.engine.records import Place
from smllm.engine.status import status
from smllm.machine.configs.config import load_configs
from smllm.text.block import render


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


# --- idle: the slot, the resume item --------------------------------------------------------

RESUMABLE = """\
id: resumable
description: Its own words for resume.
initial: A
meta:
  smllm: 1
  events:
    resume: { description: Pick up where you left off. }
    go: { description: Go. }
states:
  A:
    meta: { entryPoint: true }
    on:
      go: A
"""


def test_the_idle_list_shows_the_slot_and_offers_resume(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    text = lines(world.view(key))
    assert text[text.index("State machines:") + 7] == "Interrupted: issue GH-1 (dev) at PLAN"
    assert text[-3] == "- resume: Go back to issue GH-1 at PLAN, which unmatched put aside."


def test_a_machine_s_own_resume_description(tmp_path: Path) -> None:
    world = machines_world(tmp_path, RESUMABLE)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "resumable"))
    world.fire(key, "unmatched")
    assert lines(world.view(key))[-3] == "- resume: Pick up where you left off."


def test_list_paused_shows_no_slot(world: Scripted) -> None:
    key = world.new_session().key
    for n in range(1, 12):
        i = inst(id=f"i-{n:02d}", ref=f"GH-{n}", status="paused")
        world.reader.instances[i.id] = i._replace(holder=None, updated=f"2025-01-01T00:00:{n:02d}Z")
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-20"))
    world.fire(key, "unmatched")
    every = render(world.fire(key, "listPaused").committed.reply)
    assert "Interrupted:" not in every and "more paused" not in every
    assert every.count("- issue GH-") == 11


# --- status -----------------------------------------------------------------------------------


def test_status_of_a_session_whose_held_instance_is_gone(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    s = world.session(key)
    assert s.holding is not None
    del world.reader.instances[s.holding.id]
    got = status(world.loaded, s, world.reader)
    assert (got.held, got.kind) == (None, None)


def test_status_shows_a_slot_only_while_it_is_interrupted(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    s = world.session(key)
    assert s.holding is not None
    # a slot naming the instance the session holds (active): not an interrupted one
    got = status(world.loaded, s._replace(interrupted=s.holding), world.reader)
    assert (got.interrupted, got.interrupted_kind) == (None, None)
    assert got.held is not None and got.held.ref == "GH-1"


# --- context: the new session, the commands' folder -------------------------------------------


def test_a_keyless_enter_makes_a_session_with_the_host_s_session(world: Scripted) -> None:
    call = world.call(None, "enter", ("stateMachine", "dev"))._replace(
        host_session="h-1", harness="claude"
    )
    out = fire(world.loaded, call, world.reader, world.host)
    assert out.ok and out.session is not None and out.session.create
    made = out.session.session
    assert (made.host_session, made.harness, made.cwd) == ("h-1", "claude", world.cwd)
    assert out.audit[0].kind == "bind"
    assert out.audit[0].detail["hostSession"] == "h-1"


def test_commands_run_in_the_session_s_folder(tmp_path: Path) -> None:
    world = machines_world(tmp_path, STEPS, dirs=("sub",))
    key = world.new_session().key
    call = world.call(key, "enter", ("stateMachine", "steps"))._replace(cwd="/elsewhere")
    out = fire(world.loaded, call, world.reader, world.host)
    assert out.ok
    assert {c.cwd for c in world.host.calls} == {world.cwd}


# --- enter: a new instance's id; resume from idle -----------------------------------------------


def test_a_new_instance_never_takes_a_stored_id(world: Scripted) -> None:
    key = world.new_session().key
    first = try_fire(world, key, "enter", ("stateMachine", "dev")).instances[0].instance.id
    assert first.startswith("i-") and len(first) == 8
    # the same draws again, with that id taken (by an instance with a ref)
    again = World(world.loaded, ScriptedHost(seed=1), cwd=world.cwd)
    key2 = again.new_session().key
    assert key2 == key
    again.reader.instances[first] = inst(id=first, ref="GH-9", status="paused", holder=None)
    write = try_fire(again, key2, "enter", ("stateMachine", "dev")).instances[0]
    assert write.instance.id != first and write.instance.id.startswith("i-")
    assert write.expected == 0


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
