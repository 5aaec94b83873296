"""The JSON Schema (draft 2020-12) of a machine file: the one source of the file's shape.

The loader's shape checks (FMT-4, FMT-5, FMT-6, FMT-7) interpret this same data through
`shape.py`, and `smllm info schema` prints it, so the two cannot drift apart. Only a subset
of JSON Schema is used here, the subset `shape.py` understands: `type`, `properties`,
`additionalProperties`, `required`, `enum`, `const`, `items`, `minItems`, `minProperties`,
`minLength`, `pattern`, `propertyNames`, `anyOf` (branches told apart by JSON type),
`$ref` into `$defs`, `exclusiveMinimum`, `minimum`. Keys starting with `x-smllm-` carry
smllm's own data for messages (unsupported XState features, name kinds).
"""

from __future__ import annotations

from typing import Any

from ..model import MAX_TIMEOUT_SECS

__all__ = ["NAME_PATTERNS", "SCHEMA_ID", "UNSUPPORTED", "machine_schema"]

SCHEMA_ID = "https://smllm.dev/schema/machine-1.json"

#: machine-format.md §2.1: what each kind of name must match (FMT-7).
NAME_PATTERNS: dict[str, str] = {
    "machine": "^[A-Za-z0-9_-]+$",
    "state": "^[A-Za-z0-9_-]+$",
    "event": "^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
    "param": "^[A-Za-z_][A-Za-z0-9_]*$",
}

#: machine-format.md §2.10: XState keys that smllm v1 refuses with FMT-6, per place.
UNSUPPORTED: dict[str, tuple[str, ...]] = {
    "machine": (
        "on",
        "entry",
        "exit",
        "always",
        "context",
        "types",
        "schemas",
        "input",
        "version",
        "output",
        "invoke",
        "after",
        "tags",
        "onDone",
        "type",
        "predictableActionArguments",
    ),
    "state": (
        "states",
        "initial",
        "after",
        "invoke",
        "tags",
        "onDone",
        "output",
        "context",
        "history",
        "target",
        "id",
        "order",
    ),
    "transition": ("internal", "in", "cond"),
}

_TIMEOUT: dict[str, Any] = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": MAX_TIMEOUT_SECS,
    "description": "Seconds before the command's whole process group is killed. Default 60.",
}
_RUN: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "minLength": 1, "description": "Run by /bin/sh -c."},
        {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "Executed directly, without a shell.",
        },
    ],
    "description": "The command. Values reach it only as SMLLM_* environment variables.",
}
_CWD: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "description": "Working folder, relative to the machine file's folder.",
}


def _obj(
    props: dict[str, Any], required: list[str] | None = None, desc: str = "", **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    if desc:
        out["description"] = desc
    out.update(extra)
    return out


def _one_or_list(ref: str, desc: str) -> dict[str, Any]:
    return {
        "anyOf": [{"$ref": ref}, {"type": "array", "items": {"$ref": ref}}],
        "description": desc,
    }


def machine_schema() -> dict[str, Any]:
    """Return a fresh copy of the machine-file schema."""
    defs: dict[str, Any] = {
        "stateName": {"type": "string", "pattern": NAME_PATTERNS["state"], "x-smllm-name": "state"},
        "commandParams": _obj(
            {"run": _RUN, "timeoutSecs": _TIMEOUT, "cwd": _CWD},
            ["run"],
            "A command: passes (or succeeds) when it exits 0.",
        ),
        "guard": _obj(
            {
                "type": {"enum": ["command", "visits"], "description": "The guard's kind."},
                "params": {"type": "object", "description": "The guard's params."},
            },
            ["type"],
            "A guard: { type, params }. command runs a process; visits counts entries.",
            **{"x-smllm-kind": "guard"},
        ),
        "action": {
            "anyOf": [
                {
                    "const": "setRef",
                    "type": "string",
                    "description": "Set the instance's ref from the event's ref param.",
                },
                _obj(
                    {
                        "type": {
                            "enum": ["prompt", "command", "setRef"],
                            "description": "The action's kind.",
                        },
                        "params": {"type": "object", "description": "The action's params."},
                    },
                    ["type"],
                    "An action: { type, params }.",
                    **{"x-smllm-kind": "action"},
                ),
            ],
            "description": "An action, or the bare string setRef.",
        },
        "actions": _one_or_list("#/$defs/action", "An action or a list of actions."),
        "transitionObject": _obj(
            {
                "target": {
                    "$ref": "#/$defs/stateName",
                    "description": "The state to go to. Absent: a targetless transition.",
                },
                "guard": {"$ref": "#/$defs/guard"},
                "actions": {"$ref": "#/$defs/actions"},
                "reenter": {
                    "type": "boolean",
                    "description": "With a target equal to the source: exit and enter again.",
                },
                "description": {
                    "type": "string",
                    "description": "Replaces the event's description in this state.",
                },
            },
            None,
            "A transition candidate.",
            **{"x-smllm-kind": "transition"},
        ),
        "transition": {
            "anyOf": [{"$ref": "#/$defs/stateName"}, {"$ref": "#/$defs/transitionObject"}],
            "description": "A target state name, or a transition object.",
        },
        "transitions": {
            "anyOf": [
                {"$ref": "#/$defs/stateName"},
                {"$ref": "#/$defs/transitionObject"},
                {"type": "array", "items": {"$ref": "#/$defs/transition"}, "minItems": 1},
            ],
            "description": "A target, a transition object, or a list tried in order.",
        },
        "stateMeta": _obj(
            {
                "entryPoint": {
                    "type": "boolean",
                    "description": "enter may start, jump or reopen an instance here.",
                },
                "fallback": {
                    "type": "boolean",
                    "description": "The state unmatched detours to (at most one).",
                },
                "paramDescriptions": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                    },
                    "description": "{EVENT: {PARAM: TEXT}}: rewords params in this state only.",
                },
            },
            None,
            "smllm's data about a state.",
        ),
        "state": _obj(
            {
                "description": {
                    "type": "string",
                    "description": "For people; never shown to the agent.",
                },
                "type": {
                    "enum": ["final"],
                    "description": "final: entering it completes the instance.",
                },
                "meta": {"$ref": "#/$defs/stateMeta"},
                "entry": {"$ref": "#/$defs/actions"},
                "exit": {"$ref": "#/$defs/actions"},
                "on": {
                    "type": "object",
                    "propertyNames": {"pattern": NAME_PATTERNS["event"], "x-smllm-name": "event"},
                    "additionalProperties": {"$ref": "#/$defs/transitions"},
                    "description": "Event name → transition(s). Order is the events list's order.",
                },
                "always": {
                    "$ref": "#/$defs/transitions",
                    "description": "Eventless transitions, taken on entry.",
                },
            },
            None,
            "A state.",
            **{"x-smllm-kind": "state"},
        ),
        "eventDef": _obj(
            {
                "description": {
                    "type": "string",
                    "description": "The event's line in the events list.",
                },
                "source": {
                    "enum": ["agent", "host"],
                    "description": "Who fires it. Default agent.",
                },
                "params": {
                    "type": "object",
                    "description": "A JSON Schema (2020-12) of the params object.",
                },
            },
            None,
            "An event's description, source and params.",
        ),
        "sharedEntry": _obj(
            {
                "states": {
                    "type": "array",
                    "items": {"$ref": "#/$defs/stateName"},
                    "description": "The states this entry adds actions to.",
                },
                "position": {
                    "enum": ["before", "after"],
                    "description": "Before or after the state's own list. Default after.",
                },
                "entry": {"$ref": "#/$defs/actions"},
                "exit": {"$ref": "#/$defs/actions"},
            },
            ["states"],
            "Actions added to several states.",
        ),
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "smllm machine file",
        "description": "An smllm state machine: a strict subset of an XState v5 machine config.",
        "type": "object",
        "properties": {
            "id": {
                "type": "string",
                "pattern": NAME_PATTERNS["machine"],
                "x-smllm-name": "machine",
                "description": "The machine's id: the value of enter's stateMachine.",
            },
            "description": {"type": "string", "description": "One line for the idle list."},
            "initial": {
                "$ref": "#/$defs/stateName",
                "description": "The state a new instance starts in.",
            },
            "meta": _obj(
                {
                    "smllm": {"const": 1, "description": "The format version; must be 1."},
                    "instance": _obj(
                        {
                            "kind": {
                                "type": "string",
                                "minLength": 1,
                                # ECMA-262 `$` is the end of the text, never before a last \n
                                "pattern": "^[^\n\r\u0085\u2028\u2029]+$",
                                "x-smllm-shape": "a single line",
                                "description": "What the machine calls an instance, such as "
                                "issue: one line, shown in headers and notes.",
                            },
                            "ref": _obj(
                                {
                                    "param": {
                                        "type": "string",
                                        "pattern": NAME_PATTERNS["param"],
                                        "x-smllm-name": "param",
                                        "description": "The ref param's name. Default ref.",
                                    },
                                    "pattern": {
                                        "type": "string",
                                        "description": "Every ref must match it.",
                                    },
                                    "description": {
                                        "type": "string",
                                        "description": "What the ref is.",
                                    },
                                },
                                None,
                                "The instance's ref: a unique name such as an issue id.",
                            ),
                        },
                        None,
                        "How the machine names its instances.",
                    ),
                    "events": {
                        "type": "object",
                        "propertyNames": {
                            "pattern": NAME_PATTERNS["event"],
                            "x-smllm-name": "event",
                        },
                        "additionalProperties": {"$ref": "#/$defs/eventDef"},
                        "description": "Event name → description, source, params.",
                    },
                    "sharedActions": {
                        "type": "array",
                        "items": {"$ref": "#/$defs/sharedEntry"},
                        "description": "Entry/exit actions added to several states.",
                    },
                },
                ["smllm"],
                "smllm's data about the machine.",
            ),
            "states": {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"pattern": NAME_PATTERNS["state"], "x-smllm-name": "state"},
                "additionalProperties": {"$ref": "#/$defs/state"},
                "description": "State name → state. File order is meaningful.",
            },
        },
        "required": ["id", "initial", "meta", "states"],
        "additionalProperties": False,
        "x-smllm-kind": "machine",
        "$defs": defs,
    }
