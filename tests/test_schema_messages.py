"""Messages derived from jsonschema write values as JSON (`null`, `true`, `"x"`), not as Python
writes them (`None`, `True`, `'x'`): in a refused fire and in validate's EVT-1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm, write_machine

from smllm.machine.loader.load import load_machine_source
from smllm.machine.loader.params import json_param_errors
from smllm.machine.model import ParamSpec


def errors(schema: dict[str, Any], value: Any) -> list[str]:
    spec = ParamSpec("x", False, False, None, None, None, schema, None, False)
    return json_param_errors(spec, None, value)[0]


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        ({"enum": [None, True]}, False, "false is not one of [null, true]"),
        ({"enum": ["isTrue", True]}, None, 'null is not one of ["isTrue", true]'),
        ({"const": True}, None, "true was expected"),
        ({"type": ["string", "null"]}, True, 'true is not of type "string", "null"'),
        (
            {"type": "string"},
            {"k": [None, "it's"]},
            '{"k": [null, "it\'s"]} is not of type "string"',
        ),
        ({"required": ["a"]}, {"b": None}, '"a" is a required property'),
        (
            {"patternProperties": {"^b": {}}, "additionalProperties": False},
            {"c": None, "dd": True},
            '"c", "dd" do not match any of the regexes: "^b"',
        ),
        (
            {"additionalProperties": False},
            {"None": None},
            'Additional properties are not allowed ("None" was unexpected)',
        ),
        (
            {"prefixItems": [{}], "items": False},
            [1, None, True],
            "Expected at most 1 item but found 2 extra: [null, true]",
        ),
        ({"not": {"const": None}}, None, 'null should not be valid under {"const": null}'),
        ({"pattern": "^a"}, "b'c", '"b\'c" does not match "^a"'),
        ({"dependentRequired": {"a": ["b"]}}, {"a": False}, '"b" is a dependency of "a"'),
        ({"uniqueItems": True}, [None, None], "[null, null] has non-unique elements"),
        ({"maximum": 3}, 4.5, "4.5 is greater than the maximum of 3"),
        (
            {"contains": {"const": None}},
            [True],
            "[true] does not contain items matching the given schema",
        ),
    ],
)
def test_values_are_written_as_json(schema: dict[str, Any], value: Any, message: str) -> None:
    assert errors(schema, value) == [f"At the root: {message}"]


def test_the_metaschema_check_of_validate(tmp_path: Path) -> None:
    text = """\
id: m
initial: A
meta:
  smllm: 1
  events:
    go:
      description: Go on.
      params:
        type: object
        properties:
          a: { minLength: true }
          b: { required: [null, x] }
states:
  A:
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: B
  B:
    type: final
"""
    found = load_machine_source(text, str(tmp_path / "m.smllm.yaml"), "m.smllm.yaml").findings
    assert [f.text() for f in found] == [
        "m.smllm.yaml:11:27: error: meta.events.go.params.properties.a.minLength: not a valid "
        'JSON Schema: true is not of type "integer" (EVT-1)',
        "m.smllm.yaml:12:27: error: meta.events.go.params.properties.b.required[0]: not a valid "
        'JSON Schema: null is not of type "string" (EVT-1)',
    ]


CHOICE = """\
id: choice
initial: A
meta:
  smllm: 1
  events:
    set:
      description: Set it.
      params:
        type: object
        properties:
          flag: { description: A flag., enum: [null, true] }
          sure: { description: Sure., const: true }
states:
  A:
    entry: { type: prompt, params: { text: Set it. } }
    on:
      set: B
  B:
    type: final
"""


def test_a_refused_fire_writes_json(tmp_path: Path, env: dict[str, str]) -> None:
    write_machine(tmp_path, "choice", CHOICE)
    key = json.loads(smllm(["session", "new", "--json"], tmp_path, env).out)["session"]
    entered = smllm(
        ["fire", "--session", key, "enter", "--param", "stateMachine=choice", "--param", "ref=x"],
        tmp_path,
        env,
    )
    assert entered.code == 0, entered.out + entered.err
    for param, error in (
        (
            "flag=false",
            "set param flag doesn't match its schema. At the root: false is not one "
            "of [null, true]",
        ),
        ("sure=null", "set param sure doesn't match its schema. At the root: true was expected"),
    ):
        ran = smllm(["fire", "--session", key, "set", "--param", param], tmp_path, env)
        assert ran.code == 1
        assert f"error: {error}" in ran.out.splitlines()


REFS = """\
id: m
initial: A
meta:
  smllm: 1
  events:
    go:
      description: Go on.
      params:
        type: object
        $defs:
          word: { type: string }
        properties:
          a: { $dynamicRef: "#x" }
          b: { $dynamicRef: "#/$defs/nope" }
          c: { $id: "urn:x", $ref: "#/$defs/word" }
          d: { $dynamicRef: "#/$defs/word" }
states:
  A:
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: B
  B:
    type: final
"""


def test_refs_that_would_resolve_outside_params(tmp_path: Path) -> None:
    """A `$dynamicRef` is held to `$ref`'s rules, and an `$id` (which moves the base that
    `#/$defs/…` resolves against) is refused: each would make jsonschema fail at the fire
    (the campaign's fuzz found `$dynamicRef: "#x"` passing validate, then an internal error)."""
    found = load_machine_source(REFS, str(tmp_path / "m.smllm.yaml"), "m.smllm.yaml").findings
    assert [f.text() for f in found] == [
        "m.smllm.yaml:13:29: error: meta.events.go.params.properties.a.$dynamicRef: $dynamicRef "
        "#x must point inside params (#/$defs/…) (EVT-1)",
        "m.smllm.yaml:15:21: error: meta.events.go.params.properties.c.$id: $id can't be used in "
        "params: $refs resolve in params (EVT-1)",
        "m.smllm.yaml:14:29: error: meta.events.go.params.properties.b.$dynamicRef: $dynamicRef "
        "#/$defs/nope points at nothing in $defs (EVT-1)",
    ]


def test_a_reference_jsonschema_cannot_resolve_is_a_refusal() -> None:
    """Were a schema the load let through to reference nothing, the fire is refused with a
    sentence, never an internal error."""
    schema = {"$id": "urn:x", "$ref": "#/$defs/word"}
    [message] = errors(schema, "w")
    assert message.startswith("the schema can't check the value: ")
    assert message.endswith("; smllm validate tells more")
