"""An event's params, exactly (engine/rules.py): JSON text and JSON-schema params, values
that are not finite, params too large in a state and in idle, params at their limits, a
quoted value in a refusal, and a schema's $defs and patterns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.engine_worlds import Scripted, dev_world, lines, machines_world, refused, try_fire

from smllm.engine.reply import EventItem, ParamLine


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


def test_parse_json_text() -> None:
    from smllm.engine.rules import parse_json_text

    assert parse_json_text('{"a": [1, {"b": null}]}') == (True, {"a": [1, {"b": None}]})
    assert parse_json_text('{"a": 1, "a": 2}') == (False, "repeated object key 'a'")
    assert parse_json_text('{"x": {"a": 1, "b": 2, "a": 3}}') == (False, "repeated object key 'a'")
    assert parse_json_text("NaN") == (False, "NaN is not a JSON value")
    assert parse_json_text("1 2") == (False, "Extra data: line 1 column 3 (char 2)")
    deep = (False, "it nests more than 64 levels deep")
    assert parse_json_text("[" * 65 + "]" * 65) == deep
    assert parse_json_text("[" * 64 + "]" * 64)[0] is True
    assert parse_json_text("[" * 100_000 + "]" * 100_000) == deep


def test_non_finite() -> None:
    from smllm.engine.rules import non_finite

    inf, nan = float("inf"), float("nan")
    assert non_finite([1, {"a": [2.0, inf]}]) == inf
    assert non_finite(-inf) == -inf
    found = non_finite({"x": nan})
    assert found is not None and found != found
    assert non_finite([1.5, "a", {"b": 2, "c": [None, True]}]) is None
    assert non_finite({"a": [[[inf]]]}) == inf


def test_json_and_schema_params() -> None:
    from smllm.engine.rules import check_params
    from smllm.machine.model import ParamSpec

    props = {"a": {"type": "integer"}}
    obj = {"type": "object", "properties": props, "required": ["a"], "additionalProperties": False}
    n = ParamSpec("n", True, False, None, None, None, obj, None, False)
    s = ParamSpec(
        "s", False, True, None, None, None, {"type": "string", "minLength": 3}, None, False
    )
    assert check_params("ev", (n, s), None, (("n", '{"a": 1}'),)) == (None, {"n": {"a": 1}})
    assert check_params("ev", (n, s), None, (("n", {"a": 1}), ("s", "abc"))) == (
        None,
        {"n": {"a": 1}, "s": "abc"},
    )
    assert check_params("ev", (n, s), None, (("n", {"a": 1}), ("s", None))) == (
        None,
        {"n": {"a": 1}},
    )
    refused = {
        '{"a": "x", "b": 1, "c": 2}': "ev param n doesn't match its schema. At the root: "
        'Additional properties are not allowed ("b", "c" were unexpected). At /a: "x" is not '
        'of type "integer"',
        '{"a": 1': "ev param n must be a JSON value: Expecting ',' delimiter: line 1 column 8 "
        "(char 7)",
    }
    for text, message in refused.items():
        assert check_params("ev", (n, s), None, (("n", text),)) == (message, {})
    assert check_params("ev", (n, s), None, (("n", {"a": float("nan")}),)) == (
        "ev param n must be a JSON value: nan is not a JSON number",
        {},
    )
    assert check_params("ev", (n, s), None, (("n", {"a": 1}), ("s", "ab"))) == (
        'ev param s doesn\'t match its schema. At the root: "ab" is too short',
        {},
    )
    many = {k: {"type": "integer"} for k in "abcdefghijkl"}
    wide = ParamSpec("w", True, False, None, None, None, {"properties": many}, None, False)
    message, _ = check_params("ev", (wide,), None, (("w", {k: "x" for k in many}),))
    assert message is not None
    assert message.startswith('ev param w doesn\'t match its schema. At /a: "x" is not of type')
    assert message.endswith('At /j: "x" is not of type "integer". And 2 more')


def test_params_too_large_in_a_state(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]
    out = try_fire(world, key, "planned", ("size", deep))
    assert refused(out) == "planned params nest more than 64 levels deep"
    assert lines(out.reply)[1] == f"session {key} · dev › PLAN · issue GH-1"
    out = try_fire(world, key, "yield", ("note", 5))
    assert refused(out) == "yield param note must be a string"


def test_too_large_in_idle(world: Scripted) -> None:
    key = world.new_session().key
    out = try_fire(world, key, "enter", ("stateMachine", "x" * 70000))
    assert refused(out).startswith("enter params are too large (")
    assert lines(out.reply)[1] == f"session {key} · idle"


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
