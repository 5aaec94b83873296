"""More of the engine asserted exactly, for the last mutants that scripts/mutation found
surviving in src/smllm/engine/ (issue 12 §4): the idle list's records, the bounded fetch of
paused instances, a view's header and its moved-away line, params' schema $defs and patterns,
an undeclared event, the fallback's refusal with no entry points, and a prompt file's
failure reason (engine/idle.py, view.py, rules.py, builtins.py, host.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost
from test_mutants_engine_more import FALLBACK, HERE, Scripted, lines, machines_world, try_fire
from test_mutants_engine_more_steps import fired, fix_world

from smllm.engine.host import PromptError
from smllm.engine.idle import paused_after
from smllm.engine.reply import EventItem, MachineLine, ParamLine
from smllm.machine.configs.config import load_configs


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


# --- idle: the records of the list and of enter -----------------------------------------------


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


# --- view: the header's visits, an instance gone from the store --------------------------------


def test_a_view_s_header_counts_the_visits(tmp_path: Path) -> None:
    world = machines_world(tmp_path, files=(HERE / "machines" / "visits.smllm.yaml",))
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "visits"))
    world.fire(key, "retry")
    reply = world.view(key)
    assert lines(reply)[1].startswith(f"session {key} · visits › TRY (visit 2) · instance ")


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


# --- rules: $defs, a JSON param's pattern, an undeclared event ------------------------------

RULES = """\
id: rules
initial: A
meta:
  smllm: 1
  events:
    go:
      description: Go on.
      params:
        type: object
        properties:
          code: { type: string, $ref: "#/$defs/short" }
          tag: { type: [string, "null"], pattern: "^a" }
        $defs:
          short: { type: string, maxLength: 3 }
states:
  A:
    meta: { entryPoint: true }
    on:
      go: A
      other: A
"""


def test_params_read_their_defs_and_patterns(tmp_path: Path) -> None:
    world = machines_world(tmp_path, RULES)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "rules"))
    out = try_fire(world, key, "go", ("code", "toolong"))
    text = lines(out.reply)
    assert (
        text[2]
        == 'error: go param code doesn\'t match its schema. At the root: "toolong" is too long'
    )
    assert out.reply.events is not None
    go, other = out.reply.events.items[:2]
    assert go.params[1] == ParamLine(
        "tag",
        False,
        None,
        None,
        True,
        '{"pattern":"^a","type":["string","null"]}',
        None,
    )
    assert go.params[1].pattern is None
    # an event no meta.events entry declares: listed without a description
    assert other == EventItem("other", None)
    assert "- other" in text
    assert try_fire(world, key, "go", ("code", "ok")).ok


# --- builtins.resume_fallback: no entry points --------------------------------------------


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


# --- host.PromptError: the reason a prompt file failed -----------------------------------


def test_a_prompt_file_s_failure_names_its_reason(tmp_path: Path) -> None:
    assert PromptError("not UTF-8").reason == "not UTF-8"
    world, key, folder = fix_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "fix"), ("bugId", "BUG-1"), ("state", "REPRO"))
    fired(world, key, "reproduced", ("test", "tests/t.py"))
    (folder / "prompts" / "checklist.md").write_bytes(b"\xff\xfe bad")
    record, text = fired(world, key, "progress")
    (failure,) = record.trace
    assert failure == "Prompt failed: prompts/checklist.md: not UTF-8"
    assert text[3] == failure


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
