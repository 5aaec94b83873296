"""The events list a reply offers, exactly (engine/rules.py state_events): the built-ins in
the fallback machine, in the engine's words or the machine's own, and a transition's own
description with its JSON params."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.engine_worlds import (
    Scripted,
    dev_world,
    events,
    fired,
    fix_world,
    lines,
    machines_world,
    refused,
    try_fire,
)


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


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


WORDED = """\
id: worded
description: The built-ins in its own words.
initial: A
meta:
  smllm: 1
  events:
    go: { description: Go. }
    handled: { description: Back to A. }
    resume: { description: Back to where you were. }
    pause: { description: Set it aside. }
    unmatched: { description: Something else came up. }
states:
  A:
    meta:
      entryPoint: true
      paramDescriptions: { yield: { note: "Whom you wait for in A." } }
    on:
      go: A
  ASIDE:
    meta: { fallback: true }
    on:
      handled: A
"""


def test_the_machine_s_words_for_the_built_ins(tmp_path: Path) -> None:
    world = machines_world(tmp_path, WORDED)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "worded"))
    assert events(try_fire(world, key, "nope")) == [
        "- go: Go.",
        "- yield: Stop for now and stay in A.",
        "    note (optional): Whom you wait for in A.",
        "- pause: Set it aside.",
        "- unmatched: Something else came up.",
    ]
    world.fire(key, "unmatched")
    assert events(try_fire(world, key, "nope")) == [
        "- handled: Back to A.",
        "- resume: Back to where you were.",
        "- yield: Stop for now and stay in ASIDE.",
        "    note (optional): What you are waiting for.",
        "- pause: Set it aside.",
        "- unmatched: Something else came up.",
    ]


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


def test_a_machine_s_own_resume_description(tmp_path: Path) -> None:
    world = machines_world(tmp_path, RESUMABLE)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "resumable"))
    world.fire(key, "unmatched")
    assert lines(world.view(key))[-3] == "- resume: Pick up where you left off."


def test_a_transition_s_description_and_json_params_in_the_events_list(tmp_path: Path) -> None:
    from helpers.engine_worlds import fix_world

    world, key, _folder = fix_world(tmp_path)
    world.fire(key, "enter", ("stateMachine", "fix"))
    out = try_fire(world, key, "triaged", ("x", 1))
    assert refused(out) == "triaged has no param x (params: files, severity, bugId)"
    schema = '{"items":{"type":"string"},"minItems":1,"type":"array"}'
    assert events(out)[:4] == [
        "- triaged: Fire with the bug's id and the files it touches.",
        f"    files (required, a JSON value, schema: {schema}): Files you expect to change.",
        "    severity (optional, one of: low, high): How bad the bug is.",
        "    bugId (required, pattern: ^BUG-[0-9]+$): The tracker id, such as BUG-7.",
    ]
