"""Shape checks of a machine file (FMT-3 … FMT-7), read from the schema of `schema.py`.

A small interpreter of the JSON Schema subset that `schema.py` uses, written for messages that
point at the exact key or value: jsonschema's own messages name neither the key nor its line.
Every finding is collected; nothing stops at the first.
"""

from __future__ import annotations

import re
from typing import Any

from ..record import Record
from .schema import UNSUPPORTED

__all__ = ["ShapeIssue", "check_shape"]

Path_ = tuple[str | int, ...]

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
                if path[-1:] == ("type",) and value in _XSTATE_STATE_TYPES:
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
                    if item is not None:
                        self.check(items, item, (*path, index))
        elif isinstance(value, str):
            if len(value) < schema.get("minLength", 0):
                self.add("FMT-5", path, f"{_name(path)} must not be empty")
            elif "pattern" in schema and not re.search(schema["pattern"], value):
                kind = schema.get("x-smllm-name", "")
                if kind == "state" and ("." in value or value.startswith("#")):
                    self.add("FMT-6", path, f"target path {value} is not in smllm v1")
                else:
                    self.add("FMT-7", path, f"{kind} name {value} must match {schema['pattern']}")
        elif (
            isinstance(value, (int, float))
            and "exclusiveMinimum" in schema
            and value <= schema["exclusiveMinimum"]
        ):
            self.add(
                "FMT-5",
                path,
                f"{_name(path)} must be greater than {schema['exclusiveMinimum']}",
            )

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
                        if value in _XSTATE_ACTIONS:
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
            if isinstance(value, dict) and value.get("type") in _XSTATE_GUARDS:
                self.add("FMT-6", (*path, "type"), f"guard {value['type']} is not in smllm v1")
                return True
        if kind == "action" and isinstance(value, dict) and value.get("type") in _XSTATE_ACTIONS:
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
                if not re.search(names["pattern"], key):
                    self.add(
                        "FMT-7",
                        sub,
                        f"{names.get('x-smllm-name', '')} name {key} must match {names['pattern']}",
                        True,
                    )
                    continue
            if key in props:
                if item is not None and not (kind in ("guard", "action") and key == "type"):
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
