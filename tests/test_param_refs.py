"""A param schema with `$ref`/`$defs` reaches the agent resolved (issue 20 §8): the events list
shows each `$ref` inlined (beside other keywords, as `allOf`), never a reference the agent
can't follow; a recursive one can't be inlined and is shown with its `$defs` (EVT-13, info)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import smllm, write_machine

from smllm.machine.loader.inline import inline_refs

REFS = """\
id: refs
description: Params with references.
initial: A
meta:
  smllm: 1
  events:
    go:
      description: Go on.
      params:
        type: object
        properties:
          size: { $ref: "#/$defs/size", description: How big. }
          pair: { type: array, items: { $ref: "#/$defs/size" }, maxItems: 2 }
          named: { $ref: "#/$defs/size", maximum: 9 }
          tree: { $ref: "#/$defs/node" }
        $defs:
          size: { type: integer, minimum: 1 }
          node:
            type: object
            properties:
              children: { type: array, items: { $ref: "#/$defs/node" } }
states:
  A:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: B
  B:
    type: final
"""

NODE = (
    '{"properties":{"children":{"items":{"$ref":"#/$defs/node"},"type":"array"}},"type":"object"}'
)


def test_the_events_list_shows_references_inlined(project: Path, env: dict[str, str]) -> None:
    write_machine(project, "refs", REFS)
    ran = smllm(["fire", "enter", "--param", "stateMachine=refs", "--json"], project, env)
    key = json.loads(ran.out)["session"]
    shown = smllm(["session", "show", key], project, env).out
    lines = shown.split("<events>\n", 1)[1].split("- yield:")[0].splitlines()
    assert lines == [
        "- go: Go on.",
        '    size (optional, a JSON value, schema: {"minimum":1,"type":"integer"}): How big.',
        '    pair (optional, a JSON value, schema: {"items":{"minimum":1,"type":"integer"},'
        '"maxItems":2,"type":"array"})',
        '    named (optional, a JSON value, schema: {"allOf":[{"minimum":1,"type":"integer"}],'
        '"maximum":9})',
        '    tree (optional, a JSON value, schema: {"$defs":{"node":' + NODE + ',"size":'
        '{"minimum":1,"type":"integer"}},' + NODE[1:] + ")",
    ]
    # the inlined schemas still check values as the originals do
    fire = ["fire", "--session", key, "go", "--param", "named=10"]
    refused = smllm(fire, project, env)
    assert refused.code == 1 and "go param named doesn't match its schema" in refused.out
    info = smllm(["validate", "--info"], project, env)
    assert "(EVT-13)" in info.out and "the schema of tree refers to itself" in info.out


def test_inline_refs_keeps_data_and_reports_loops() -> None:
    params = {"$defs": {"a": {"type": "string"}, "b": {"items": {"$ref": "#/$defs/b"}}}}
    schema = {
        "enum": [{"$ref": "#/$defs/a"}],
        "anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
    }
    inlined, stuck = inline_refs(schema, params)
    assert inlined == {
        "enum": [{"$ref": "#/$defs/a"}],  # data, not a schema
        "anyOf": [{"type": "string"}, {"items": {"$ref": "#/$defs/b"}}],
    }
    assert stuck == ["#/$defs/b"]
    assert inline_refs({"$ref": "#/$defs/missing"}, params) == ({"$ref": "#/$defs/missing"}, [])
