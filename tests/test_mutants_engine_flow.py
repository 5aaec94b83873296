"""More of the engine asserted exactly, for mutants that scripts/mutation found surviving in
src/smllm/engine/ (issue 12 §4): resume from idle when the slot went stale, the stop decision
in a gone state and after the instance left, prompts that end a run of blocks, and the reply
to a commit that lost a race."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost

from smllm.engine.fire import fire, lost
from smllm.engine.prompt import prompt_submitted
from smllm.engine.records import AuditRecord, Instance, block_digest
from smllm.engine.stop import Decision, stop
from smllm.errors import RefTaken, StoreConflict
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

FALLBACK = Path(__file__).resolve().parent / "machines" / "fallback.smllm.yaml"
Scripted = World[ScriptedHost]


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def try_fire(world: Scripted, key: str | None, event: str, *params: tuple[str, Any]) -> Any:
    return fire(world.loaded, world.call(key, event, *params), world.reader, world.host)


def interrupted(world: Scripted) -> tuple[str, Instance]:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    (inst,) = world.reader.instances.values()
    return key, inst


def lines(reply: Any) -> list[str]:
    return render(reply).split("\n")


# --- enter.resume_idle ------------------------------------------------------------------------


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


# --- view.stop --------------------------------------------------------------------------------


def test_stop_in_a_gone_state_blocks_with_its_offers(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    (inst,) = world.reader.instances.values()
    world.reader.instances[inst.id] = inst._replace(state="GONE")
    s = world.session(key)
    out = stop(world.loaded, s, None, world.reader, world.host, render)
    assert out.decision == Decision.BLOCK
    text = render(out.reply)
    assert out.text == text
    assert text.split("\n")[1:4] == [
        f"session {key} · dev › GONE · issue GH-1",
        "Saved state GONE no longer exists in dev. Fire pause, then enter with a state: "
        "PLAN, WORK, DONE",
        f'Fire one event: smllm({{ session: "{key}", event, params }})',
    ]
    assert "- pause: Put issue GH-1 aside and return to idle." in text
    assert out.session is not None
    assert out.session.session.last_block == block_digest(text)
    assert out.session.changes == frozenset({"blocks", "lastActive", "lastBlock"})
    detail = {"machine": "dev", "state": "GONE", "kind": "issue", "label": "GH-1"}
    assert [(a.kind, a.detail) for a in out.audit] == [("block", detail)]
    plain = stop(world.loaded, s, None, world.reader, world.host)
    assert plain.text is None and plain.session is not None
    assert plain.session.changes == frozenset({"blocks", "lastActive"})
    assert plain.session.session.last_block is None


def test_stop_after_the_instance_left(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    other = world.new_session().key
    world.fire(other, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    s = world.session(key)
    out = stop(world.loaded, s, None, world.reader, world.host, render)
    left = f"issue GH-1 moved to session {other}; you are in idle"
    assert out.decision == Decision.BLOCK and out.text == render(out.reply)
    assert lines(out.reply)[1:4] == [f"session {key} · idle", left, "State machines:"]
    assert out.session is not None and out.session.session.holding is None
    assert out.session.changes == frozenset({"holding", "lastActive", "lastBlock"})
    assert out.session.session.last_block == block_digest(out.text)
    assert out.audit == (AuditRecord(out.audit[0].at, "moved", {"message": left}),)


# --- prompt.prompt_submitted ------------------------------------------------------------------


def test_a_prompt_after_blocks(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    s = world.session(key)
    assert prompt_submitted(s, world.host, "hi") == (None, ())
    text = "<smllm>\nthe block\n</smllm>"
    blocked = s._replace(blocks=1, last_block=block_digest(text))
    assert prompt_submitted(blocked, world.host, text) == (None, ())
    assert prompt_submitted(blocked, world.host, "note\n\n" + text) == (None, ())
    for prompt in ("something else", None):
        write, audit = prompt_submitted(blocked, world.host, prompt)
        assert write is not None and write.session.blocks == 0
        assert write.changes == frozenset({"yielded", "blocks", "lastActive"})
        after = {"yielded": False, "blocks": 0, "cleared": {"yielded": False, "blocks": 1}}
        assert [(a.kind, a.detail) for a in audit] == [("prompt", after)]
    no_digest = blocked._replace(last_block=None)
    assert prompt_submitted(no_digest, world.host, text)[0] is not None
    yielded = s._replace(yielded=True, last_block=block_digest(text))
    write, audit = prompt_submitted(yielded, world.host, text)
    assert write is not None and write.session.yielded is False
    assert audit[0].detail["cleared"] == {"yielded": True, "blocks": 0}


# --- fire.lost --------------------------------------------------------------------------------


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


def test_block_digest_keeps_lone_surrogates() -> None:
    assert block_digest("a\udcffb").startswith("3:")
    assert block_digest("a\udcffb") != block_digest("a\udcfeb")
