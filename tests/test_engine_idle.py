"""Idle, exactly (engine/idle.py): the config's idle prompt wherever a reply returns to idle,
the idle list's records, its slot and resume item, a completion's params and notes, the
paused list cut at ten, listPaused, and the bounded fetch of paused instances
(`paused_after`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.engine_machines import QUICK
from helpers.engine_worlds import (
    Scripted,
    dev_world,
    enter,
    fire,
    idle_world,
    inst,
    lines,
    middle,
    try_fire,
)

from smllm.engine.idle import paused_after
from smllm.engine.reply import EventItem, MachineLine
from smllm.machine.model import IdlePrompt
from smllm.text.block import render


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


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


# --- the idle prompt ------------------------------------------------------------------------------


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


# --- the idle list: its records, the slot, the resume item, a completion --------------------------


def test_the_idle_records_are_exact(world: Scripted) -> None:
    key = world.new_session().key
    reply = world.view(key)
    assert reply.idle is not None and reply.idle.machines is not None
    fallback = reply.idle.machines[1]
    assert fallback == MachineLine(
        "fallback",
        "A machine with a fallback state for requests that fit no event.",
        "task",
        "taskId",
        None,
        None,
        "WORK",
        ("WORK",),
        False,
    )
    assert fallback.host_only is False
    assert reply.events is not None
    enter = reply.events.items[0]
    assert isinstance(enter, EventItem) and enter.name == "enter"
    ref, state = enter.params[1:]
    assert (ref.name, ref.required, state.name, state.required) == (
        "issueId | taskId",
        False,
        "state",
        False,
    )
    assert ref.required is False and state.required is False


def test_the_idle_list_shows_the_slot_and_offers_resume(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    text = lines(world.view(key))
    assert text[text.index("State machines:") + 7] == "Interrupted: issue GH-1 (dev) at PLAN"
    assert text[-3] == "- resume: Go back to issue GH-1 at PLAN, which unmatched put aside."


def test_a_completion_shows_the_params_and_the_notes(tmp_path: Path) -> None:
    from helpers.engine_worlds import machines_world

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


# --- the paused list's cut and listPaused ---------------------------------------------------------


def paused_lines(text: list[str]) -> list[str]:
    start = text.index("Paused:") + 1
    end = next(i for i in range(start, len(text)) if not text[i].startswith("- job"))
    return text[start:end] + ([text[end]] if text[end].startswith("…") else [])


def test_the_paused_list_is_cut_at_ten(tmp_path: Path) -> None:
    from helpers.engine_worlds import inst, machines_world

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


def test_list_paused_lists_every_paused_instance(world: Scripted) -> None:
    from smllm.text.block import render

    key = world.new_session().key
    refs = [f"GH-{n}" for n in range(1, 13)]
    for ref in refs:
        enter(world, key, ref)
        fire(world, key, "pause")
    idle = render(world.view(key)).split("\n")
    assert "…and 2 more paused: fire listPaused to list them all." in idle
    assert "- listPaused: List all 12 paused instances." in idle
    out = try_fire(world, key, "listPaused")
    assert out.ok and (out.instances, out.session, out.audit) == ((), None, ())
    lines = render(out.reply).split("\n")
    listed = [f"- issue {ref} (dev) at PLAN" for ref in reversed(refs)]
    assert lines[1:15] == [f"session {key} · idle", "Paused:", *listed]
    assert lines[15] == f'Fire one event: smllm({{ session: "{key}", event, params }})'


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


# --- paused_after: the bounded fetch of paused instances ------------------------------------------


class CountingReader:
    """The world's reader, noting the limit of each `paused` read."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.limits: list[int | None] = []

    def paused(self, machines: Any, limit: int | None) -> Any:
        self.limits.append(limit)
        return self.reader.paused(machines, limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)


def test_paused_after_fetches_the_limit_and_the_written_and_one(world: Scripted) -> None:
    key = world.new_session().key
    for n in range(4):
        world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", f"T-{n}"))
        world.fire(key, "pause")
    written = [i for i in world.reader.instances.values() if i.ref in ("T-0", "T-1")]
    reader = CountingReader(world.reader)
    listed, total = paused_after(world.loaded, reader, written, 2)
    assert reader.limits == [2 + 2 + 1]
    assert (len(listed), total) == (2, 4)
    paused_after(world.loaded, reader, written, None)
    assert reader.limits[1:] == [None]


def _paused_world(world: Scripted, count: int) -> tuple[str, list[Any]]:
    """A session that paused `count` fallback tasks, and the store's paused instances in the
    order the reader lists them."""
    key = world.new_session().key
    for n in range(count):
        world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", f"T-{n}"))
        world.fire(key, "pause")
    stored, total = world.reader.paused(list(world.loaded.machines), None)
    assert total == count == len(stored)
    return key, stored


def test_paused_after_a_cut_fetch_counts_a_listed_instance_once(world: Scripted) -> None:
    """The fetch is cut (6 paused, 3 fetched) and the commit resumes the first listed: it
    leaves the count once, not once more for lying in the fetch."""
    _key, stored = _paused_world(world, 6)
    resumed = stored[0]._replace(status="active")
    listed, total = paused_after(world.loaded, world.reader, [resumed], 1)
    assert (listed, total) == ([stored[1]], 5)


def test_paused_after_a_cut_fetch_keeps_what_was_not_paused(world: Scripted) -> None:
    """The fetch is cut, and the commit writes instances that weren't paused in the store: an
    active one moving on, and a new one. Neither leaves the paused count."""
    key, stored = _paused_world(world, 6)
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-active"))
    (active,) = [i for i in world.reader.instances.values() if i.status == "active"]
    new = active._replace(id="i-new", ref="T-new")
    assert world.reader.instance(new.machine, new.id) is None
    listed, total = paused_after(world.loaded, world.reader, [active, new], 1)
    assert (listed, total) == ([stored[0]], 6)
