"""The agent's text: a `Reply` rendered as one exact `<smllm>` block (agent-text.md).

Every line but author text holds one line: values from outside are escaped so that no ref,
param, note or command output can open or close a block.
"""

from __future__ import annotations

from ..engine.reply import EventsList, Header, IdleList, ParamLine, Reply
from ..engine.rules import quoted
from ..jsontext import dumps as _json_dumps
from .escape import escape

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["escape", "render", "session_call"]


def session_call(key: str | None) -> str:
    if key is None:
        return "Fire one event: smllm({ event, params })"
    return f'Fire one event: smllm({{ session: "{key}", event, params }})'


def _header(h: Header) -> str:
    if h.session is None:
        return "no session · idle"
    if h.machine is None:
        return f"session {h.session} · idle"
    visit = f" (visit {h.visit})" if h.visit >= 2 else ""
    return f"session {h.session} · {h.machine} › {h.state}{visit} · {h.kind} {h.label}"


def _value(value: Any) -> str:
    if isinstance(value, str):
        return quoted(value)
    return _json_dumps(value)


def _param(p: ParamLine) -> str:
    parts = ["required" if p.required else "optional"]
    if p.enum:
        parts.append("one of: " + ", ".join(p.enum))
    if p.pattern is not None:
        parts.append(f"pattern: {p.pattern}")
    if p.json:
        parts.append("a JSON value" + (f", schema: {p.schema}" if p.schema else ""))
    line = f"    {p.name} ({', '.join(parts)})"
    return line + (f": {p.description}" if p.description else "")


def _events(out: list[str], events: EventsList) -> None:
    out.append(session_call(events.session))
    out.append("<events>")
    for item in events.items:
        head = f"- {item.name}: {item.description}" if item.description else f"- {item.name}"
        out.append(escape(head))
        out.extend(escape(_param(p)) for p in item.params)
    out.append("</events>")


def _idle(out: list[str], idle: IdleList) -> None:
    if idle.machines is not None:
        if not idle.machines:
            out.append("No state machines are configured.")
        else:
            out.append("State machines:")
        for m in idle.machines:
            out.append(f"- {m.id}: {m.description}" if m.description else f"- {m.id}")
            ref = f"    {m.kind} id param {m.ref_param}"
            if m.ref_pattern is not None:
                ref += f" (pattern: {m.ref_pattern})"
            if m.ref_description:
                ref += f": {m.ref_description}"
            out.append(ref)
            starts = f"    starts at: {m.initial}"
            if m.entry_points:
                starts += "; entry points: " + ", ".join(m.entry_points)
            out.append(starts)
            if m.host_only:
                out.append("    only its host fires its events")
    if idle.interrupted is not None:
        i = idle.interrupted
        out.append(f"Interrupted: {i.kind} {i.label} ({i.machine}) at {i.state}")
    if idle.paused:
        out.append("Paused:")
        out.extend(f"- {p.kind} {p.label} ({p.machine}) at {p.state}" for p in idle.paused)
    if idle.more:
        out.append(f"…and {idle.more} more paused: fire listPaused to list them all.")


def render(reply: Reply) -> str:
    """The block, without a final newline."""
    lines = ["<smllm>", _header(reply.header)]
    if reply.arrived:
        lines.append(f"Arrived by: {reply.arrived}")
    if reply.params:
        lines.append("Params: " + ", ".join(f"{n} = {_value(v)}" for n, v in reply.params))
    lines.extend(reply.notes)
    lines.extend(reply.trace)
    if reply.error is not None:
        lines.append(f"error: {reply.error}")
    # everything so far but the tag itself is one line of outside text
    lines[1:] = [escape(line) for line in lines[1:]]
    if reply.yielded is not None:
        lines.append(escape(f"Yielded: staying in {reply.yielded}. You can end your turn."))
    if reply.instructions:
        lines.append("<instructions>")
        lines.append("\n\n".join(reply.instructions))
        lines.append("</instructions>")
    tail: list[str] = []
    if reply.completed is not None:
        tail.append(f"Completed {reply.completed}. You are now in idle.")
    if reply.idle is not None:
        _idle(tail, reply.idle)
    lines.extend(escape(line) for line in tail)
    if reply.events is not None:
        _events(lines, reply.events)
    lines.append("</smllm>")
    return "\n".join(lines)
