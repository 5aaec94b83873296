"""Shape checks of a machine file (FMT-3 … FMT-7), read from the schema of `schema.py`.

A small interpreter of the JSON Schema subset that `schema.py` uses, written for messages that
point at the exact key or value: jsonschema's own messages name neither the key nor its line.
Every finding is collected; nothing stops at the first.
"""

from __future__ import annotations

import math
from typing import Any

from ...recordclass import Record
from ..findings import Path_
from ..regex import pattern_matches
from .schema import UNSUPPORTED

__all__ = ["ShapeIssue", "check_shape", "non_finite", "without_nulls"]


_XSTATE_ACTIONS = frozenset(
    {
        "raise",
        "sendTo",
        "sendParent",
        "emit",
        "log",
        "spawnChild",
        "stopChild",
        "enqueueActions",
        "cancel",
        "assign",
        "forwardTo",
        "escalate",
        "choose",
        "pure",
    }
)
_XSTATE_GUARDS = frozenset({"and", "or", "not", "stateIn"})
_XSTATE_STATE_TYPES = frozenset({"parallel", "history", "atomic", "compound"})

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}


class ShapeIssue(Record):
    rule: str
    path: Path_
    at_key: bool  # True: the finding is at the key (unknown or misnamed keys)
    message: str


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _fits(value: Any, type_: str) -> bool:
    actual = _json_type(value)
    return actual == type_ or (type_ == "number" and actual == "integer")


def _one_of(value: Any, words: frozenset[str]) -> bool:
    """`value in words` for any YAML value: a list or mapping is unhashable, and in no set."""
    return isinstance(value, str) and value in words


def _name(path: Path_) -> str:
    for part in reversed(path):
        if isinstance(part, str):
            return part
    return "the file"


class _Checker:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.issues: list[ShapeIssue] = []

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            ref = schema["$ref"]
            target = self.root["$defs"][ref.rsplit("/", 1)[1]]
            # sibling keys of $ref (a description) say nothing about the shape
            schema = target
        return schema

    def add(self, rule: str, path: Path_, message: str, at_key: bool = False) -> None:
        self.issues.append(ShapeIssue(rule, path, at_key, message))

    def check(self, schema: dict[str, Any], value: Any, path: Path_) -> None:
        schema = self.resolve(schema)
        if "anyOf" in schema:
            self.check_any(schema["anyOf"], value, path)
            return
        if self.xstate_value(schema.get("x-smllm-kind"), value, path):
            return
        if "const" in schema:
            if value != schema["const"] or _json_type(value) != _json_type(schema["const"]):
                if path == ("meta", "smllm"):
                    self.add("FMT-3", path, "meta.smllm must be 1")
                else:
                    self.add("FMT-5", path, f"{_name(path)} must be {schema['const']!r}")
            return
        if "enum" in schema:
            if value not in schema["enum"] or isinstance(value, bool):
                if path[-1:] == ("type",) and _one_of(value, _XSTATE_STATE_TYPES):
                    self.add("FMT-6", path, f"type: {value} is not in smllm v1")
                else:
                    self.add(
                        "FMT-5",
                        path,
                        f"{_name(path)} must be one of: "
                        + ", ".join(str(v) for v in schema["enum"]),
                    )
            return
        type_ = schema.get("type")
        if type_ is not None and not _fits(value, type_):
            self.add("FMT-5", path, f"{_name(path)} must be {_TYPE_WORDS[type_]}")
            return
        if isinstance(value, dict):
            self.check_object(schema, value, path)
        elif isinstance(value, list):
            if len(value) < schema.get("minItems", 0):
                self.add("FMT-5", path, f"{_name(path)} must not be empty")
            items = schema.get("items")
            if items is not None:
                for index, item in enumerate(value):
                    self.check(items, item, (*path, index))
        elif isinstance(value, str):
            if len(value) < schema.get("minLength", 0):
                self.add("FMT-5", path, f"{_name(path)} must not be empty")
            elif "pattern" in schema and not pattern_matches(schema["pattern"], value):
                kind = schema.get("x-smllm-name", "")
                if kind == "state" and ("." in value or value.startswith("#")):
                    self.add("FMT-6", path, f"target path {value} is not in smllm v1")
                elif "x-smllm-shape" in schema:
                    self.add("FMT-5", path, f"{_name(path)} must be {schema['x-smllm-shape']}")
                else:
                    self.add("FMT-7", path, f"{kind} name {value} must match {schema['pattern']}")
        elif isinstance(value, (int, float)):
            if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
                self.add(
                    "FMT-5",
                    path,
                    f"{_name(path)} must be greater than {schema['exclusiveMinimum']}",
                )
            elif "maximum" in schema and value > schema["maximum"]:
                self.add("FMT-5", path, f"{_name(path)} must be at most {schema['maximum']}")

    def check_any(self, branches: list[dict[str, Any]], value: Any, path: Path_) -> None:
        wanted: list[str] = []
        for branch in branches:
            resolved = self.resolve(branch)
            inner = [self.resolve(b) for b in resolved.get("anyOf", [resolved])]
            for candidate in inner:
                type_ = candidate.get("type", "string" if "pattern" in candidate else None)
                if type_ is None and "const" in candidate:
                    type_ = _json_type(candidate["const"])
                if type_ is None:
                    continue
                wanted.append(_TYPE_WORDS[type_])
                if _fits(value, type_):
                    if (
                        isinstance(value, str)
                        and "const" in candidate
                        and value != candidate["const"]
                    ):
                        if _one_of(value, _XSTATE_ACTIONS):
                            self.add("FMT-6", path, f"action {value} is not in smllm v1")
                        else:
                            self.add(
                                "MCH-10",
                                path,
                                f"action {value} doesn't exist (types: prompt, command, "
                                "setRef); a bare string action can only be setRef",
                            )
                        return
                    self.check(candidate, value, path)
                    return
        if _name(path) == "guard" and isinstance(value, str):
            self.add("FMT-6", path, "a string guard is not in smllm v1")
            return
        words = list(dict.fromkeys(wanted))
        self.add("FMT-5", path, f"{_name(path)} must be " + " or ".join(words))

    def xstate_value(self, kind: str | None, value: Any, path: Path_) -> bool:
        """Report XState features that aren't in smllm v1 before their shape (FMT-6)."""
        if kind == "guard":
            if isinstance(value, str):
                self.add("FMT-6", path, "a string guard is not in smllm v1")
                return True
            if isinstance(value, dict) and _one_of(value.get("type"), _XSTATE_GUARDS):
                self.add("FMT-6", (*path, "type"), f"guard {value['type']} is not in smllm v1")
                return True
        if (
            kind == "action"
            and isinstance(value, dict)
            and _one_of(value.get("type"), _XSTATE_ACTIONS)
        ):
            self.add("FMT-6", (*path, "type"), f"action {value['type']} is not in smllm v1")
            return True
        return False

    def check_object(self, schema: dict[str, Any], value: dict[str, Any], path: Path_) -> None:
        props: dict[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        kind = schema.get("x-smllm-kind")
        if len([v for v in value.values() if v is not None]) < schema.get("minProperties", 0):
            self.add("FMT-5", path, f"{_name(path)} must not be empty")
        for key in schema.get("required", []):
            if value.get(key) is None:
                if (*path, key) == ("meta", "smllm"):
                    self.add("FMT-3", path, "meta.smllm must be 1")
                else:
                    self.add("FMT-5", path, f"missing {key}")
        names = schema.get("propertyNames")
        for key, item in value.items():
            sub = (*path, key)
            if names is not None:
                if kind is None and ("*" in key):
                    self.add("FMT-6", sub, f"wildcard event {key} is not in smllm v1", True)
                    continue
                if not pattern_matches(names["pattern"], key):
                    self.add(
                        "FMT-7",
                        sub,
                        f"{names.get('x-smllm-name', '')} name {key} must match {names['pattern']}",
                        True,
                    )
                    continue
            if key in props:
                if kind in ("guard", "action") and key == "type":
                    # the loader names a wrong type word (MCH-9, MCH-10); here only its shape
                    if item is not None and not isinstance(item, str):
                        self.add("FMT-5", sub, "type must be a string")
                elif item is not None:
                    self.check(props[key], item, sub)
                continue
            if isinstance(extra, dict):
                if item is not None:
                    self.check(extra, item, sub)
                continue
            if extra is False:
                if kind in UNSUPPORTED and key in UNSUPPORTED[kind]:
                    self.add("FMT-6", sub, f"{key} is not in smllm v1", True)
                else:
                    self.add("FMT-4", sub, f"unknown key {key} (allowed: {', '.join(props)})", True)


def check_shape(schema: dict[str, Any], data: dict[str, Any]) -> list[ShapeIssue]:
    """Every shape issue of `data` against the machine schema, in document order of checks."""
    checker = _Checker(schema)
    checker.check(schema, data, ())
    return checker.issues


def non_finite(value: Any, path: Path_ = ()) -> list[Path_]:
    """Where `value` holds .inf or .nan: YAML has them, JSON (and so a machine config) doesn't."""
    if isinstance(value, float) and not math.isfinite(value):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in non_finite(v, (*path, i))]
    return []


def without_nulls(value: Any, path: Path_ = ()) -> Any:
    """`value` with every mapping entry whose value is null left out: machine-format.md §2 says
    `key:` or `key: ~` counts as absent. An event's params are a JSON Schema, where null is a
    value (`default: null`), so they are kept whole; a null list item stays, as an error."""
    if path[:2] == ("meta", "events") and len(path) == 4 and path[3] == "params":
        return value
    if isinstance(value, dict):
        return {k: without_nulls(v, (*path, k)) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v, (*path, i)) for i, v in enumerate(value)]
    return value
