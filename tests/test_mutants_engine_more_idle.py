"""More of the engine asserted exactly, for mutants that scripts/mutation found surviving in
src/smllm/engine/ (issue 12 §4): the config's idle prompt (`[idle] on-enter`) wherever a reply
returns to idle: a view, a pause, a completion, and an instance that moved away
(engine/idle.py, moves.py, view.py, fire.moved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost
from test_mutants_engine_more import HERE, Scripted, lines

from smllm.machine.configs.config import load_configs
from smllm.machine.model import IdlePrompt
from smllm.text.block import render

FALLBACK = HERE / "machines" / "fallback.smllm.yaml"


def idle_world(tmp_path: Path, idle: IdlePrompt) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    loaded = load_configs((config,))._replace(idle=idle)
    return World(loaded, ScriptedHost(seed=1), cwd=cwd)


def middle(text: str) -> list[str]:
    """A reply's lines after its header, up to the list of state machines."""
    got = text.split("\n")
    return got[2 : got.index("State machines:")]


def four_replies(world: Scripted) -> list[list[str]]:
    """A view in idle, a pause, a completion and a call after the instance moved away."""
    key = world.new_session().key
    out = [middle(render(world.view(key)))]
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    out.append(middle(render(world.fire(key, "pause").committed.reply)))
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    out.append(middle(render(world.fire(key, "done").committed.reply)))
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    other = world.new_session().key
    world.fire(other, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    out.append(middle(render(world.fire(key, "yield").committed.reply)))
    moved = f"error: issue GH-1 moved to session {other}; you are in idle"
    assert out[3][-1] == moved or out[3][0] == moved
    out[3] = [line for line in out[3] if line != moved]
    return out


@pytest.mark.parametrize("from_file", [False, True])
def test_the_idle_prompt_wherever_a_reply_returns_to_idle(tmp_path: Path, from_file: bool) -> None:
    if from_file:
        (tmp_path / "idle.md").write_text("Pick a machine.\r\n\r\n")
        idle = IdlePrompt(None, str(tmp_path / "idle.md"), "idle.md")
    else:
        idle = IdlePrompt("Pick a machine.\n", None, "")
    view, paused, completed, moved = four_replies(idle_world(tmp_path, idle))
    prompt = ["<instructions>", "Pick a machine.", "</instructions>"]
    assert view == prompt
    assert paused == [
        "Paused task T-1 at WORK.",
        "<instructions>",
        "Leaving WORK.",
        "",
        "Pick a machine.",
        "</instructions>",
    ]
    assert completed == [
        "Arrived by: done from WORK",
        "<instructions>",
        "Leaving WORK.",
        "",
        "Report.",
        "",
        "Pick a machine.",
        "</instructions>",
        "Completed task T-1. You are now in idle.",
    ]
    assert moved == prompt


def test_an_idle_prompt_file_that_is_missing(tmp_path: Path) -> None:
    idle = IdlePrompt(None, str(tmp_path / "idle.md"), "idle.md")
    view, paused, completed, moved = four_replies(idle_world(tmp_path, idle))
    failed = "Prompt failed: idle.md: not found"
    assert view == [failed]
    assert paused == [
        "Paused task T-1 at WORK.",
        failed,
        "<instructions>",
        "Leaving WORK.",
        "</instructions>",
    ]
    assert completed == [
        "Arrived by: done from WORK",
        failed,
        "<instructions>",
        "Leaving WORK.",
        "",
        "Report.",
        "</instructions>",
        "Completed task T-1. You are now in idle.",
    ]
    assert moved == [failed]


def test_an_empty_idle_prompt_file_shows_nothing(tmp_path: Path) -> None:
    (tmp_path / "idle.md").write_text("\n")
    idle = IdlePrompt(None, str(tmp_path / "idle.md"), "idle.md")
    world = idle_world(tmp_path, idle)
    key = world.new_session().key
    assert middle(render(world.view(key))) == []
    assert lines(world.view(key))[1] == f"session {key} · idle"


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


# --- view of a held state: its entry prompts again --------------------------------------------


def test_a_view_gathers_the_entry_prompts_again(tmp_path: Path) -> None:
    from test_mutants_engine_more_steps import fix_world

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


# --- moves: the slot and the resume state on arrival and on letting go ------------------------


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


def test_leaving_the_fallback_state_by_an_event_forgets_the_resume_state(tmp_path: Path) -> None:
    world = idle_world(tmp_path, IdlePrompt("Idle.", None, ""))
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    world.fire(key, "unmatched")
    out = world.fire(key, "handled").committed
    (write,) = out.instances
    assert (write.instance.state, write.instance.resume_state) == ("WORK", None)


QUICK = """\
id: quick
description: Finished by an event with params, or at once from B.
initial: A
meta:
  smllm: 1
  instance: { kind: job, ref: { param: jobId } }
  events:
    finish:
      description: Finish.
      params: { type: object, properties: { summary: { type: string } } }
states:
  A:
    meta: { entryPoint: true }
    on:
      finish: DONE
  B:
    meta: { entryPoint: true }
    always: DONE
  DONE:
    type: final
"""


def test_a_completion_shows_the_params_and_the_notes(tmp_path: Path) -> None:
    from test_mutants_engine_more import machines_world

    world = machines_world(tmp_path, QUICK)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-1"))
    out = world.fire(key, "finish", ("summary", "all done")).committed
    assert lines(out.reply)[1:5] == [
        f"session {key} · quick › DONE · job J-1",
        "Arrived by: finish from A",
        'Params: summary = "all done"',
        "Completed job J-1. You are now in idle.",
    ]
    # a paused instance entered straight into its final state: a takeover note, and it is no
    # longer listed as paused
    world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-2"))
    world.fire(key, "pause")
    other = world.new_session().key
    world.fire(other, "enter", ("stateMachine", "quick"), ("jobId", "J-3"))
    world.fire(other, "pause")
    world.fire(other, "enter", ("stateMachine", "quick"), ("jobId", "J-2"))
    out = world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-3"), ("state", "B"))
    text = lines(out.committed.reply)
    assert text[1:5] == [
        f"session {key} · quick › DONE · job J-3",
        "Arrived by: enter (jump from A) via B",
        'Params: stateMachine = "quick", jobId = "J-3", state = "B"',
        "Completed job J-3. You are now in idle.",
    ]
    assert "Paused:" not in text
    world.fire(other, "pause")
    world.fire(other, "enter", ("stateMachine", "quick"), ("jobId", "J-4"))
    out = world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-4"), ("state", "B"))
    text = lines(out.committed.reply)
    assert text[4].startswith(f"Took over from session {other} (last active 2026-01-01 00:00")
    assert text[5] == "Completed job J-4. You are now in idle."


# --- idle: the paused list's cut and listPaused -----------------------------------------------


def paused_lines(text: list[str]) -> list[str]:
    start = text.index("Paused:") + 1
    end = next(i for i in range(start, len(text)) if not text[i].startswith("- job"))
    return text[start:end] + ([text[end]] if text[end].startswith("…") else [])


def test_the_paused_list_is_cut_at_ten(tmp_path: Path) -> None:
    from test_mutants_engine_more import inst, machines_world

    world = machines_world(tmp_path, QUICK)
    for n in range(1, 12):
        i = inst(id=f"i-{n:02d}", machine="quick", ref=f"J-{n}", state="A", status="paused")
        world.reader.instances[i.id] = i._replace(holder=None, updated=f"2025-01-01T00:00:{n:02d}Z")
    key = world.new_session().key
    text = lines(world.view(key))
    more = "…and 1 more paused: fire listPaused to list them all."
    assert paused_lines(text) == [f"- job J-{n} (quick) at A" for n in range(11, 1, -1)] + [more]
    assert text[-3] == "- listPaused: List all 11 paused instances."
    # completing a paused instance at once leaves ten: all listed, listPaused not offered
    out = world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-11"), ("state", "B"))
    text = lines(out.committed.reply)
    assert paused_lines(text) == [f"- job J-{n} (quick) at A" for n in range(10, 0, -1)]
    assert "listPaused" not in render(out.committed.reply)
    # pausing another makes eleven again
    world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-12"))
    out = world.fire(key, "pause").committed
    text = lines(out.reply)
    assert paused_lines(text)[:2] == ["- job J-12 (quick) at A", "- job J-10 (quick) at A"]
    assert paused_lines(text)[-1] == more
    assert text[-3] == "- listPaused: List all 11 paused instances."
    every = lines(world.fire(key, "listPaused").committed.reply)
    assert "State machines:" not in every and every[2] == "Paused:"
    assert every[3:14] == ["- job J-12 (quick) at A"] + [
        f"- job J-{n} (quick) at A" for n in range(10, 0, -1)
    ]
    assert every[14] == f'Fire one event: smllm({{ session: "{key}", event, params }})'
