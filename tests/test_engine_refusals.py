"""A machine event's checks and a call's refusals, exactly (engine/fire.py): an agent firing a
host event, no transition matched, setRef's problems, idle's refusals with a slot, and a
commit that lost a race."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.engine_worlds import (
    Scripted,
    dev_world,
    fired,
    fix_world,
    lines,
    machines_world,
    refused,
    try_fire,
)
from helpers.memory_world import World

from smllm.engine.fire import fire, lost
from smllm.engine.records import Place
from smllm.errors import RefTaken, StoreConflict
from smllm.text.block import render


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


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


def test_idle_refusals_with_a_slot(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    out = try_fire(world, key, "planned")
    assert refused(out) == "planned is not offered in idle (offered: enter, resume)"
    out = try_fire(world, key, "resume", ("why", "x"))
    assert refused(out) == "resume takes no params, but got why"
    assert lines(out.reply)[1] == f"session {key} · idle"


# --- fire._ref_problem ----------------------------------------------------------------------------


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


# --- fire.lost ------------------------------------------------------------------------------------


def test_a_lost_race_in_idle_is_refused_with_the_message(world: Scripted) -> None:
    key = world.new_session().key
    call = world.call(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    outcome = fire(world.loaded, call, world.reader, world.host)
    (write,) = outcome.instances
    taken = lost(world.loaded, call, world.reader, world.host, RefTaken("dev", "GH-1"), outcome)
    assert taken.ok is False and taken.instances == ()
    assert lines(taken.reply)[2] == "error: another issue of dev already has ref GH-1"
    conflict = StoreConflict("dev", write.instance.id)
    changed = lost(world.loaded, call, world.reader, world.host, conflict, outcome)
    assert changed.ok is False
    # the instance isn't stored yet: its label comes from the write that lost
    assert lines(changed.reply)[2] == "error: another session changed issue GH-1; you are in idle"
    unknown = lost(world.loaded, call, world.reader, world.host, RefTaken("gone", "X-1"), outcome)
    assert lines(unknown.reply)[2] == "error: another instance of gone already has ref X-1"


def test_a_lost_race_names_the_stored_instance(tmp_path: Path) -> None:
    world = machines_world(tmp_path, TAGGER)
    key = world.new_session().key
    fired(world, key, "enter", ("stateMachine", "tagger"))
    (stored,) = world.reader.instances.values()
    call = world.call(key, "tag", ("jobId", "J-1"))
    outcome = fire(world.loaded, call, world.reader, world.host)
    assert outcome.instances[0].instance.label == "J-1"
    out = lost(
        world.loaded, call, world.reader, world.host, StoreConflict("tagger", stored.id), outcome
    )
    # the label of the instance as stored, not as the losing write would have made it
    assert lines(out.reply)[2] == f"error: another session changed job {stored.id}; you are in idle"
    unknown = StoreConflict("tagger", "i-zzzzzz")
    out = lost(world.loaded, call, world.reader, world.host, unknown, outcome)
    assert lines(out.reply)[2] == "error: another session changed job i-zzzzzz; you are in idle"
    keyless = world.call(None, "enter", ("stateMachine", "tagger"))
    out = lost(world.loaded, keyless, world.reader, world.host, unknown, outcome)
    assert refused(out) == "another session changed job i-zzzzzz; you are in idle"
    assert lines(out.reply)[1] == "no session · idle"
