"""A call that finds its saved state gone from the machine, or its machine no longer configured
(engine/fire.py, rules.py): only pause and unmatched are offered, with a note that says how to
go on, and every other event is refused. What enter and resume do then: test_enter.py,
test_engine_builtins.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.engine_worlds import (
    FALLBACK,
    Scripted,
    dev_world,
    enter,
    events,
    lines,
    refused,
    try_fire,
)
from helpers.memory_world import World, write_project

from smllm.engine.records import Instance
from smllm.machine.configs.config import load_configs
from smllm.text.block import render


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


GONE_NOTE = (
    "Saved state GONE no longer exists in dev. Fire pause, then enter with a state: "
    "PLAN, WORK, DONE"
)


def gone_block(key: str, *lines: str, kind: str = "issue") -> str:
    return "\n".join(
        [
            "<smllm>",
            f"session {key} · dev › GONE · issue GH-1",
            GONE_NOTE,
            *lines,
            f'Fire one event: smllm({{ session: "{key}", event, params }})',
            "<events>",
            f"- pause: Put {kind} GH-1 aside and return to idle.",
            "- unmatched: The request fits none of these; handle it from idle, then resume.",
            "</events>",
            "</smllm>",
        ]
    )


def held_gone(world: Scripted) -> tuple[str, Instance]:
    key = world.new_session().key
    enter(world, key, "GH-1")
    (inst_,) = world.reader.instances.values()
    world.reader.instances[inst_.id] = inst_._replace(state="GONE")
    return key, world.reader.instances[inst_.id]


def test_a_gone_state_offers_only_pause_and_unmatched(world: Scripted) -> None:
    from smllm.text.block import render

    key, gone = held_gone(world)
    assert render(world.view(key)) == gone_block(key)
    for event, params, error in (
        ("planned", (), "planned is not offered here (offered: pause, unmatched)"),
        ("pause", (("a", 1),), "pause takes no params, but got a"),
        ("pause", (("a", 1), ("a", 2)), "pause got param a more than once"),
        ("unmatched", (("b", 1), ("c", 1)), "unmatched takes no params, but got b"),
    ):
        out = try_fire(world, key, event, *params)
        assert (out.ok, out.instances, out.session) == (False, (), None)
        assert render(out.reply) == gone_block(key, f"error: {error}")
    out = try_fire(world, key, "unmatched")
    assert out.ok and [w.instance.status for w in out.instances] == ["interrupted"]
    assert render(out.reply).split("\n")[2] == (
        "Interrupted issue GH-1 at GONE. Handle the request, then fire resume from idle."
    )
    out = try_fire(world, key, "pause")
    (write,) = out.instances
    assert out.ok and (write.instance.status, write.instance.holder) == ("paused", None)
    assert write.instance.state == "GONE" and write.expected == gone.version
    assert render(out.reply).split("\n")[2] == "Paused issue GH-1 at GONE."


def test_a_saved_state_that_is_gone(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    found = world.reader.find("fallback", "T-1")
    assert found is not None
    world.reader.instances[found.id] = found._replace(state="GONE")
    out = try_fire(world, key, "done")
    assert refused(out) == "done is not offered here (offered: pause, unmatched)"
    assert lines(out.reply)[1:3] == [
        f"session {key} · fallback › GONE · task T-1",
        "Saved state GONE no longer exists in fallback. Fire pause, then enter with a state: "
        "WORK, ASIDE, DONE",
    ]
    gone = [
        "- pause: Put task T-1 aside and return to idle.",
        "- unmatched: The request fits none of these; handle it in ASIDE, then resume.",
    ]
    assert events(out) == gone
    assert (
        render(world.view(key)).split("<events>\n")[1].split("\n</events>")[0].split("\n") == gone
    )
    out = try_fire(world, key, "pause", ("why", "x"))
    assert refused(out) == "pause takes no params, but got why"


def test_a_machine_no_longer_configured(world: Scripted, tmp_path: Path) -> None:
    from smllm.text.block import render

    key = world.new_session().key
    enter(world, key, "GH-1")
    _cwd, config = write_project(tmp_path / "other", FALLBACK)
    other = World(load_configs((config,)), world.host, cwd=world.cwd, reader=world.reader)
    block = "\n".join(
        [
            "<smllm>",
            f"session {key} · dev › PLAN · instance GH-1",
            "error: state machine dev is not configured (its file might have errors); fix the"
            " config, then fire any event: the session goes on where it was",
            f'Fire one event: smllm({{ session: "{key}", event, params }})',
            "<events>",
            "- pause: Put instance GH-1 aside and return to idle.",
            "</events>",
            "</smllm>",
        ]
    )
    assert render(other.view(key)) == block
    for event, params in (("yield", ()), ("pause", (("a", 1),)), ("planned", ())):
        out = try_fire(other, key, event, *params)
        assert (out.ok, out.instances, out.session) == (False, (), None)
        assert render(out.reply) == block
    out = try_fire(other, key, "pause")
    (write,) = out.instances
    assert out.ok and (write.instance.status, write.instance.holder) == ("paused", None)
    assert render(out.reply).split("\n")[1:3] == [
        f"session {key} · idle",
        "Paused instance GH-1 at PLAN.",
    ]
