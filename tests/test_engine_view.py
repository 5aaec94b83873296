"""What the engine says outside a call, exactly (engine/view.py, stop.py, prompt.py): a view's
header and entry prompts, a view and a stop after the instance left or moved, a stop in a
gone state, and a prompt submitted after a run of blocks."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.engine_worlds import (
    Scripted,
    dev_world,
    enter,
    idle_world,
    lines,
    machines_world,
    middle,
)

from smllm.engine.prompt import prompt_submitted
from smllm.engine.records import AuditRecord, block_digest
from smllm.engine.stop import Decision, stop
from smllm.machine.model import IdlePrompt
from smllm.text.block import render

HERE = Path(__file__).resolve().parent


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


# --- view -----------------------------------------------------------------------------------------


def test_a_view_s_header_counts_the_visits(tmp_path: Path) -> None:
    world = machines_world(tmp_path, files=(HERE / "machines" / "visits.smllm.yaml",))
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "visits"))
    world.fire(key, "retry")
    reply = world.view(key)
    assert lines(reply)[1].startswith(f"session {key} · visits › TRY (visit 2) · instance ")


def test_a_view_gathers_the_entry_prompts_again(tmp_path: Path) -> None:
    from helpers.engine_worlds import fix_world

    world, key, folder = fix_world(tmp_path)
    world.fire(key, "enter", ("stateMachine", "fix"), ("bugId", "BUG-1"))
    assert lines(world.view(key))[1:6] == [
        f"session {key} · fix › TRIAGE · bug BUG-1",
        "<instructions>",
        "Triage the bug: find the files it touches.",
        "Then fire triaged with the bug id and the files.",
        "</instructions>",
    ]
    (folder / "prompts" / "triage.md").unlink()
    assert lines(world.view(key))[1:3] == [
        f"session {key} · fix › TRIAGE · bug BUG-1",
        "Prompt failed: prompts/triage.md: not found",
    ]
    assert world.host.calls == []  # a view runs no command


def test_view_in_idle_and_after_the_instance_left(world: Scripted) -> None:
    from smllm.text.block import render

    key = world.new_session().key
    idle = render(world.view(key)).split("\n")
    assert idle[1:3] == [f"session {key} · idle", "State machines:"]
    enter(world, key, "GH-1")
    other = world.new_session().key
    enter(world, other, "GH-1")
    left = render(world.view(key)).split("\n")
    assert left[1:3] == [
        f"session {key} · idle",
        f"issue GH-1 moved to session {other}; you are in idle",
    ]
    assert left[3:] == idle[2:]


def test_a_view_of_an_instance_gone_from_the_store(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    found = world.reader.find("fallback", "T-1")
    assert found is not None
    del world.reader.instances[found.id]
    text = lines(world.view(key))
    assert text[1:3] == [
        f"session {key} · idle",
        f"instance {found.id} no longer exists; you are in idle",
    ]


def test_a_view_and_a_stop_after_the_instance_moved(tmp_path: Path) -> None:
    (tmp_path / "idle.md").write_text("Pick a machine.\n")
    world = idle_world(tmp_path, IdlePrompt(None, str(tmp_path / "idle.md"), "idle.md"))
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    other = world.new_session().key
    world.fire(other, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    left = f"issue GH-1 moved to session {other}; you are in idle"
    expected = [left, "<instructions>", "Pick a machine.", "</instructions>"]
    assert middle(render(world.view(key))) == expected
    out = world.stop(key, None)
    assert out.text is not None and middle(out.text) == expected


# --- view.stop ------------------------------------------------------------------------------------


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


# --- prompt.prompt_submitted ----------------------------------------------------------------------


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
