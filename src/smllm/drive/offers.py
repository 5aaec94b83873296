"""What the model may do, as SMI capabilities: each event the session's current state offers
becomes a tool whose parameters are the event's params schema, and the granted work tools
follow. The events are the ones the session's `<smllm>` block lists (`engine.view`), so CAPS
and the block can't disagree; a state's own param specs add the full schema of JSON params."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..api.app import Result
from ..engine.reply import EventItem, ParamLine
from ..machine.model import ParamSpec

__all__ = ["caps_value", "event_names", "event_tool"]


def caps_value(view: Result, work_tools: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The CAPS payload for a session's view: its events as tools, then `work_tools`."""
    events = view.reply.events
    items = events.items if events is not None else ()
    specs, defs = _state_specs(view)
    tools = [event_tool(item, specs.get(item.name, ()), defs.get(item.name)) for item in items]
    return {"tools": [*tools, *work_tools]}


def event_names(view: Result) -> tuple[str, ...]:
    events = view.reply.events
    return tuple(item.name for item in events.items) if events is not None else ()


def event_tool(
    item: EventItem, specs: Sequence[ParamSpec] = (), defs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One offered event as a tool declaration. A string param is a string (with its enum);
    its pattern is said in the description rather than put in the schema, so that the
    engine's own check (smllm's ECMA dialect) is the one that decides and words the refusal.
    A JSON param takes its declared schema; `defs` are the event's `$defs` for its `$ref`s."""
    by_name = {s.name: s for s in specs}
    properties: dict[str, Any] = {}
    for line in item.params:
        properties[line.name] = _param_schema(line, by_name.get(line.name))
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [line.name for line in item.params if line.required],
        "additionalProperties": False,
    }
    if defs:
        parameters["$defs"] = dict(defs)
    tool: dict[str, Any] = {"name": item.name}
    if item.description:
        tool["description"] = item.description
    tool["parameters"] = parameters
    return tool


def _param_schema(line: ParamLine, spec: ParamSpec | None) -> dict[str, Any]:
    if line.json:
        if spec is not None:
            found: dict[str, Any] = dict(spec.schema)
        elif line.schema is not None:
            import json

            found = json.loads(line.schema)
        else:
            found = {}
        if line.description and "description" not in found:
            found["description"] = line.description
        return found
    schema: dict[str, Any] = {"type": "string"}
    if line.enum is not None:
        schema["enum"] = list(line.enum)
    words = [line.description] if line.description else []
    if line.pattern is not None:
        words.append(f"Must match the pattern {line.pattern}.")
    if words:
        schema["description"] = " ".join(words)
    return schema


def _state_specs(
    view: Result,
) -> tuple[dict[str, tuple[ParamSpec, ...]], dict[str, dict[str, Any]]]:
    """The param specs of the state the session holds (event → specs) and each event's
    `$defs`; empty in idle or where the machine or state is gone."""
    session = view.session
    if session is None or session.holding is None:
        return {}, {}
    instance = view.stores.instance(*session.holding)
    machine = view.loaded.machines.get(instance.machine) if instance is not None else None
    state = machine.states.get(instance.state) if machine and instance else None
    if machine is None or state is None:
        return {}, {}
    defs = {name: ev.defs for name, ev in machine.events.items() if ev.defs}
    return dict(state.params), defs
