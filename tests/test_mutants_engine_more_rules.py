"""More of the engine asserted exactly, for mutants that scripts/mutation found surviving in
src/smllm/engine/ (issue 12 §4): events lists worded by the machine, a saved state that is
gone, params at their limits, a quoted value, idle's refusals with a slot, a lost race's
label, and the records' helpers (engine/rules.py, fire.py, records.py)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost
from test_mutants_engine_more import FALLBACK, Scripted, lines, machines_world, refused, try_fire
from test_mutants_engine_more_fire import TAGGER
from test_mutants_engine_more_steps import fired

from smllm.engine.fire import fire, lost
from smllm.engine.records import Place, SessionWrite, iso
from smllm.errors import StoreConflict
from smllm.machine.configs.config import load_configs
from smllm.text.block import render


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def events(out: Any) -> list[str]:
    text = lines(out.reply)
    return text[text.index("<events>") + 1 : text.index("</events>")]


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


def test_resume_is_offered_only_in_the_fallback_state(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    found = world.reader.find("fallback", "T-1")
    assert found is not None
    world.reader.instances[found.id] = found._replace(resume_state="WORK")
    out = try_fire(world, key, "resume")
    assert refused(out) == "resume is not offered here (offered: done, yield, pause, unmatched)"


def test_params_at_their_limits(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    # '[["note", "…"]]': 14 characters around the note
    out = try_fire(world, key, "yield", ("note", "x" * (65536 - 14)))
    assert out.ok
    out = try_fire(world, key, "yield", ("note", "x" * (65536 - 13)))
    assert refused(out) == "yield params are too large (65537 bytes of JSON; at most 65536)"
    deep: Any = 1
    for _ in range(70):
        deep = {"a": deep}
    out = try_fire(world, key, "planned", ("size", deep))
    assert refused(out) == "planned params nest more than 64 levels deep"


def test_a_quoted_value_escapes_quotes_and_backslashes(world: Scripted) -> None:
    out = try_fire(world, None, "enter", ("stateMachine", 'a"b\\c'))
    assert refused(out) == (
        'enter param stateMachine must be one of: dev, fallback (got "a\\"b\\\\c")'
    )


def test_idle_refusals_with_a_slot(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    world.fire(key, "unmatched")
    out = try_fire(world, key, "planned")
    assert refused(out) == "planned is not offered in idle (offered: enter, resume)"
    out = try_fire(world, key, "resume", ("why", "x"))
    assert refused(out) == "resume takes no params, but got why"
    assert lines(out.reply)[1] == f"session {key} · idle"


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


# --- records ------------------------------------------------------------------------------------


def test_a_merge_that_finds_the_holding_changed(world: Scripted) -> None:
    key = world.new_session().key
    s = world.session(key)
    write = SessionWrite(s, False, Place("dev", "i-1"), frozenset({"holding"}))
    with pytest.raises(StoreConflict) as caught:
        write.merge(s)
    assert (caught.value.machine, caught.value.id) == ("", key)


def test_iso_is_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        at = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
        assert iso(at) == "2026-01-01T10:00:00.000000Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_transition_s_description_and_json_params_in_the_events_list(tmp_path: Path) -> None:
    from test_mutants_engine_more_steps import fix_world

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
