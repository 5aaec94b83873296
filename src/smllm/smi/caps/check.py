"""Reading and checking one ACT against the capabilities (see the package docstring for the
rules and the choices where the seed is silent): strict JSON, `Capabilities`, `parse_act`,
`check_act`, and what a policy sees of a session (`SessionInfo`)."""

from __future__ import annotations

import copy
import functools
import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from ..stream import Block
from ..tokens import Kind

__all__ = [
    "MAX_ACT_CHARS",
    "MAX_DEPTH",
    "REFUSAL_TYPES",
    "Action",
    "Capabilities",
    "Policy",
    "Refusal",
    "SessionInfo",
    "Tool",
    "check_act",
    "parse_act",
]

#: the longest ACT payload read (characters of text plus ids of token runs)
MAX_ACT_CHARS = 1 << 20
#: the deepest JSON nesting read in an ACT (jsonschema and json recurse)
MAX_DEPTH = 64
#: the refusals this module gives; a policy may give its own types too
REFUSAL_TYPES = (
    "malformed_action",
    "missing_id",
    "duplicate_id",
    "unknown_capability",
    "invalid_arguments",
    "schema_violation",
    "policy_denied",
)
_ACT_KEYS = ("id", "type", "name", "arguments")
_MESSAGE_CHARS = 200


@dataclass(frozen=True)
class Refusal:
    """Why an ACT is not run: the OBS error's `type` and `message`. `action_id` is the id the
    ACT gave, when it could be read."""

    type: str
    message: str
    action_id: str | None = None

    def error(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


@dataclass(frozen=True)
class Action:
    """One ACT as read: `type` "tool", "action" (an embodied action by name) or "raw" (an
    undescribed payload, `name` None); `raw` is the block itself."""

    id: str | None
    type: str
    name: str | None
    arguments: Any
    raw: Block


@dataclass(frozen=True)
class SessionInfo:
    """What a policy and an action runner know of the session an ACT came from: its `id`,
    the capabilities in force (`caps`), the `metadata` its caller attached at
    `Runtime.session(..., metadata=...)` (a read-only mapping: a tenant, a user, their
    permissions) and the sampler `seed` it was given. One runtime serves several tenants by
    deciding on `metadata`."""

    id: str
    caps: Capabilities
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, MappingProxyType):
            object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))


class Policy(Protocol):
    """The runtime's last say over an action that passed every other check, knowing which
    session (and so which tenant) asks."""

    def __call__(self, action: Action, session: SessionInfo) -> Refusal | None: ...


# -- strict JSON -------------------------------------------------------------------------------


class _Bad(ValueError):
    pass


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in items:
        if key in out:
            raise _Bad(f"the key {key!r} appears twice")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise _Bad(f"{name} is not JSON")


def _walk(value: Any, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth` and strings that aren't valid Unicode."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _Bad("a string with a lone surrogate") from None
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > max_depth:
            raise _Bad(f"nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        else:
            stack.extend((v, depth + 1) for v in item)


def _loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """JSON read strictly; raises _Bad with the reason."""
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except _Bad:
        raise
    except RecursionError:
        raise _Bad(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise _Bad(f"not JSON: {exc}") from None
    _walk(value, max_depth)
    return value


# -- capabilities ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: Mapping[str, Any]
    description: str | None = None
    #: keys of the declaration other than name, parameters, description, kept as given
    other: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    """A CAPS payload: `tools`, `actions` (embodied action names), and every other top-level
    key kept as given (`other`)."""

    tools: tuple[Tool, ...] = ()
    actions: tuple[str, ...] = ()
    other: Mapping[str, Any] = field(default_factory=dict)
    _validators: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_payload(cls, text: str) -> Capabilities:
        """A CAPS block's payload; ValueError says what's wrong."""
        return cls.from_payloads([text])

    @classmethod
    def from_payloads(cls, texts: Sequence[str]) -> Capabilities:
        """The CAPS blocks of one transmission, which declare together: their lists (tools,
        actions) concatenate, any other key takes the last block's value."""
        values = []
        for text in texts:
            try:
                values.append(_loads(text))
            except _Bad as exc:
                raise ValueError(f"caps: {exc}") from None
        if len(values) == 1:
            return cls.from_value(values[0])
        merged: dict[str, Any] = {}
        for value in values:
            if not isinstance(value, dict):
                raise ValueError("caps must be a JSON object")
            for key, item in value.items():
                known = merged.get(key)
                both = isinstance(known, list) and isinstance(item, list)
                merged[key] = known + item if both else item
        return cls.from_value(merged)

    @classmethod
    def from_value(cls, value: Any) -> Capabilities:
        """From a parsed JSON value (copied: later changes to it are not seen)."""
        if not isinstance(value, dict):
            raise ValueError("caps must be a JSON object")
        value = copy.deepcopy(value)
        tools = tuple(_tool(t, i) for i, t in enumerate(_list(value, "tools")))
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"caps: tool names must be unique ({', '.join(twice)} repeated)")
        actions = _list(value, "actions")
        if not all(isinstance(a, str) and a for a in actions):
            raise ValueError("caps.actions must be a list of non-empty names")
        if len(set(actions)) != len(actions):
            raise ValueError("caps: action names must be unique")
        other = {k: v for k, v in value.items() if k not in ("tools", "actions")}
        return cls(tools, tuple(actions), other)

    def to_value(self) -> dict[str, Any]:
        """The JSON value again (tools and actions first, then the other keys)."""
        value: dict[str, Any] = {}
        if self.tools:
            value["tools"] = [
                {
                    "name": t.name,
                    "parameters": dict(t.parameters),
                    **({"description": t.description} if t.description is not None else {}),
                    **t.other,
                }
                for t in self.tools
            ]
        if self.actions:
            value["actions"] = list(self.actions)
        value.update(self.other)
        return value

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def validator(self, tool: Tool) -> Any:
        """The tool's JSON Schema validator (Draft 2020-12), made once. Remote `$ref`s are
        never fetched: the registry holds only the metaschemas."""
        found = self._validators.get(tool.name)
        if found is None:
            from jsonschema import Draft202012Validator
            from referencing import Registry

            found = Draft202012Validator(dict(tool.parameters), registry=Registry())
            self._validators[tool.name] = found
        return found


def _list(value: dict[str, Any], key: str) -> list[Any]:
    items = value.get(key, [])
    if not isinstance(items, list):
        raise ValueError(f"caps.{key} must be a list")
    return items


def _tool(value: Any, index: int) -> Tool:
    where = f"caps.tools[{index}]"
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} needs a non-empty string name")
    parameters = value.get("parameters", {"type": "object"})
    if not isinstance(parameters, dict):
        raise ValueError(f"{where} ({name}): parameters must be a JSON Schema object")
    problem = _schema_problem_of(json.dumps(parameters, sort_keys=True))
    if problem is not None:
        raise ValueError(f"{where} ({name}): parameters is not a valid JSON Schema: {problem}")
    description = value.get("description")
    if description is not None and not isinstance(description, str):
        raise ValueError(f"{where} ({name}): description must be a string")
    other = {k: v for k, v in value.items() if k not in ("name", "parameters", "description")}
    return Tool(name, parameters, description, other)


@functools.lru_cache(maxsize=512)
def _schema_problem_of(schema: str) -> str | None:
    """Why a tool's parameters (as sorted JSON text) are no JSON Schema, or None. Cached: a
    runtime that sends its tools again each turn (a new state's CAPS) checks each schema once,
    and the metaschema check is most of a CAPS block's cost."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(json.loads(schema))
    except SchemaError as exc:
        return f"{exc.json_path}: {_short(exc.message)}"
    return None


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


# -- ACT ---------------------------------------------------------------------------------------


def parse_act(
    block: Block,
    *,
    raw_id: str | Callable[[], str] = "raw-1",
    max_chars: int = MAX_ACT_CHARS,
    max_depth: int = MAX_DEPTH,
) -> Action | Refusal:
    """An ACT block read: a structured `Action`, a raw one (`raw_id` gives its id, called
    only then), or a `Refusal` (malformed_action; invalid_arguments for string arguments that
    aren't JSON)."""
    if block.kind is not Kind.ACT:
        raise ValueError(f"parse_act reads an act block, not {block.kind.tag}")
    size = sum(len(p) if isinstance(p, str) else len(p.ids) for p in block.parts)
    if size > max_chars:
        return Refusal(
            "malformed_action", f"an ACT payload of {size} characters (at most {max_chars})"
        )
    text = block.text
    if block.is_text and text.lstrip().startswith("{"):
        try:
            value = _loads(text, max_depth)
        except _Bad as exc:
            return Refusal("malformed_action", f"the ACT payload is not a valid JSON object: {exc}")
        return _structured(value, block, max_depth)
    return Action(raw_id() if callable(raw_id) else raw_id, "raw", None, None, block)


def _structured(value: dict[str, Any], block: Block, max_depth: int) -> Action | Refusal:
    act_id = value.get("id")
    if act_id is not None and not isinstance(act_id, str):
        return Refusal("malformed_action", f"the ACT id must be a string, not {_kind(act_id)}")
    unknown = [k for k in value if k not in _ACT_KEYS]
    if unknown:
        return Refusal(
            "malformed_action",
            f"unknown ACT keys: {', '.join(map(repr, unknown))} (an ACT has id, type, name, "
            "arguments)",
            act_id,
        )
    kind = value.get("type")
    if kind not in ("tool", "action"):
        return Refusal(
            "malformed_action", f'the ACT type must be "tool" or "action", not {kind!r}', act_id
        )
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return Refusal("malformed_action", "the ACT needs a non-empty string name", act_id)
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI-style: the arguments as JSON text
        try:
            arguments = _loads(arguments, max_depth)
        except _Bad as exc:
            return Refusal("invalid_arguments", f"the arguments string: {exc}", act_id)
    return Action(act_id or None, kind, name, arguments, block)


def _kind(value: Any) -> str:
    """A JSON value's kind, for messages."""
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", str: "a string"}
    if value is None:
        return "null"
    return names.get(type(value), "an object" if isinstance(value, dict) else type(value).__name__)


def check_act(
    action: Action,
    caps: Capabilities,
    seen_ids: Set[str] | Iterable[str],
    policy: Policy | None = None,
    session: SessionInfo | None = None,
) -> Refusal | None:
    """None if the action may run; else the first reason it may not (well-formed, id present
    and unused in the session, declared, arguments valid, policy). The policy sees `session`
    (default: an anonymous one holding `caps`)."""
    seen = seen_ids if isinstance(seen_ids, Set) else frozenset(seen_ids)
    act_id = action.id if isinstance(action.id, str) and action.id else None

    def refuse(kind: str, message: str) -> Refusal:
        return Refusal(kind, message, act_id)

    if action.type not in ("tool", "action", "raw"):
        return refuse("malformed_action", f"unknown action type {action.type!r}")
    if action.type != "raw" and (not isinstance(action.name, str) or not action.name):
        return refuse("malformed_action", "the action needs a name")
    if action.id is not None and not isinstance(action.id, str):
        return refuse("malformed_action", "the ACT id must be a string")
    if act_id is None:
        return refuse("missing_id", "the ACT has no id")
    if act_id in seen:
        return refuse("duplicate_id", f"the id {act_id!r} was already used in this session")
    if action.type == "tool":
        tool = caps.tool(action.name or "")
        if tool is None:
            return refuse("unknown_capability", f"no tool {action.name!r} is declared in caps")
        if not isinstance(action.arguments, dict):
            return refuse(
                "invalid_arguments",
                f"a tool's arguments are an object, not {_kind(action.arguments)}",
            )
        problem = _schema_problem(caps, tool, action.arguments)
        if problem is not None:
            return refuse("schema_violation", f"{tool.name}: {problem}")
    elif action.type == "action":
        if action.name not in caps.actions:
            return refuse("unknown_capability", f"no action {action.name!r} is declared in caps")
    elif not caps.actions:
        return refuse("unknown_capability", "a raw action, but caps declares no actions")
    if policy is None:
        return None
    try:
        verdict = policy(action, session or SessionInfo("", caps))
    except Exception as exc:  # a broken policy denies
        return refuse("policy_denied", f"the policy failed: {type(exc).__name__}: {exc}")
    if verdict is None:
        return None
    if isinstance(verdict, Refusal):
        return (
            verdict
            if verdict.action_id == act_id
            else Refusal(verdict.type, verdict.message, act_id)
        )
    return refuse("policy_denied", f"the policy answered {type(verdict).__name__}, not a Refusal")


def _schema_problem(caps: Capabilities, tool: Tool, arguments: Any) -> str | None:
    try:
        errors = list(itertools.islice(caps.validator(tool).iter_errors(arguments), 4))
    except Exception as exc:  # an unresolvable $ref and the like: refuse, don't run
        return f"the tool's schema could not be applied: {_short(str(exc))}"
    if not errors:
        return None
    shown = "; ".join(f"{e.json_path}: {_short(e.message)}" for e in errors[:3])
    return shown + ("; …" if len(errors) > 3 else "")
