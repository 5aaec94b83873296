"""`smllm info schema`: the one schema of machine files, valid for editors and for the loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import MACHINES, smllm
from jsonschema import Draft202012Validator

from smllm.machine.sources.yamltree import load_yaml

EXAMPLE = Path(__file__).parent.parent / "src" / "smllm" / "examples" / "dev" / "dev.smllm.yaml"


def _schema(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    ran = smllm(["info", "schema"], tmp_path, env)
    assert ran.code == 0, ran.err
    schema: dict[str, Any] = json.loads(ran.out)
    return schema


def test_the_schema_is_draft_2020_12_and_accepts_every_fixture(
    tmp_path: Path, env: dict[str, str]
) -> None:
    schema = _schema(tmp_path, env)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    files = [*sorted(MACHINES.rglob("*.smllm.yaml")), EXAMPLE]
    assert len(files) == 7
    for path in files:
        data = load_yaml(path.read_bytes()).data
        assert list(validator.iter_errors(data)) == [], path


def test_the_schema_rejects_what_the_loader_rejects(tmp_path: Path, env: dict[str, str]) -> None:
    validator = Draft202012Validator(_schema(tmp_path, env))
    data = load_yaml(EXAMPLE.read_bytes()).data
    for key, value in (("initail", "PLAN"), ("on", {}), ("states", {})):
        bad = {**data, key: value}
        assert list(validator.iter_errors(bad)), key
    bad_state = json.loads(json.dumps(data))
    bad_state["states"]["PLAN"]["type"] = "parallel"
    assert list(validator.iter_errors(bad_state))


def test_every_key_has_a_description(tmp_path: Path, env: dict[str, str]) -> None:
    schema = _schema(tmp_path, env)

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                target = sub
                if "$ref" in sub and "description" not in sub:
                    target = schema["$defs"][sub["$ref"].rsplit("/", 1)[1]]
                assert "description" in target, f"{where}.{name}"
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(schema, "schema")


def test_write(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["info", "schema", "--write", "machine.schema.json"], tmp_path, env)
    assert (ran.code, ran.out) == (0, "wrote machine.schema.json\n")
    assert json.loads((tmp_path / "machine.schema.json").read_text()) == _schema(tmp_path, env)
    # a place that can't be written: a clear error, nothing left behind
    ran = smllm(["info", "schema", "--write", "no/such/folder/s.json"], tmp_path, env)
    where = tmp_path / "no" / "such" / "folder" / "s.json"
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == f"error: can't write {where}: No such file or directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["machine.schema.json"]
