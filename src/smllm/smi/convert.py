"""Conversations into SMI transmissions: from OpenAI-style message lists, and from the native
JSON block form (what `smllm smi compile` reads, a conversation a line).

OpenAI messages map as the seed's roles do: system → SYS, developer → DEV, user → USR,
tool → OBS (`{"caused_by", "ok": true, "content"}`), assistant → THINK (`reasoning_content`),
OUT (`content`) and one ACT per tool call (`{"id", "type": "tool", "name", "arguments"}`, string
arguments parsed). `tools` become CAPS and `ctrl` a CTRL block, in the first transmission.
Runtime messages in a row share one transmission while they keep the seed's block order; a
message that would break it (a user message after tool results) starts the next transmission,
so "OBS, then a new USR after an interrupt" is two runtime transmissions in a row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .stream import Block, Part, TokenRun, Transmission, canonical_json
from .tokens import Kind

__all__ = ["from_messages", "from_native", "to_native"]

_ROLES = {"system": Kind.SYS, "developer": Kind.DEV, "user": Kind.USR, "tool": Kind.OBS}


def from_messages(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    ctrl: Mapping[str, Any] | None = None,
) -> list[Transmission]:
    """OpenAI-style chat messages (and tools, and a CTRL payload) as transmissions."""
    out: list[list[Block]] = []
    side: str | None = None
    head: list[Block] = []
    if ctrl is not None:
        head.append(Block.of(Kind.CTRL, dict(ctrl)))
    if tools:
        head.append(Block.of(Kind.CAPS, {"tools": [_tool(t, i) for i, t in enumerate(tools)]}))
    for n, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"message {n + 1} is not an object")
        role = message.get("role")
        if role == "assistant":
            out.append(_assistant(message, n))
            side = "model"
            continue
        if role not in _ROLES:
            raise ValueError(f"message {n + 1}: unknown role {role!r}")
        kind = _ROLES[str(role)]
        if kind is Kind.OBS:
            block = Block.of(kind, _observation(message, n))
        else:
            block = Block(kind, _parts(message.get("content"), n))
        if side != "runtime" or int(out[-1][-1].kind) > int(kind):
            out.append([])
        out[-1].append(block)
        side = "runtime"
    if head:
        if out and out[0] and out[0][0].side == "runtime":
            first = head + out[0]
            out[0] = sorted(first, key=lambda b: int(b.kind))  # stable: same types keep order
        else:
            out.insert(0, head)
    return [Transmission(tuple(blocks)) for blocks in out]


def _tool(tool: Mapping[str, Any], i: int) -> dict[str, Any]:
    """An OpenAI tool (`{"type": "function", "function": {…}}`, or the function itself) as a
    CAPS tool: name, description (when given), parameters."""
    function = tool.get("function", tool) if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError(f"tool {i + 1} has no name")
    entry: dict[str, Any] = {"name": function["name"]}
    if "description" in function:
        entry["description"] = function["description"]
    entry["parameters"] = function.get("parameters", {"type": "object"})
    return entry


def _assistant(message: Mapping[str, Any], n: int) -> list[Block]:
    blocks: list[Block] = []
    reasoning = message.get("reasoning_content")
    if reasoning:
        blocks.append(Block(Kind.THINK, _parts(reasoning, n)))
    content = message.get("content")
    if content:
        blocks.append(Block(Kind.OUT, _parts(content, n)))
    for call in message.get("tool_calls") or ():
        blocks.append(Block.of(Kind.ACT, _action(call, n)))
    if not blocks:
        raise ValueError(f"message {n + 1}: an assistant message with nothing in it")
    return blocks


def _action(call: Any, n: int) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise ValueError(f"message {n + 1}: a tool call is not an object")
    function = call.get("function", call)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            raise ValueError(f"message {n + 1}: tool call arguments aren't JSON: {exc}") from None
    if not isinstance(call.get("id"), str) or not isinstance(function.get("name"), str):
        raise ValueError(f"message {n + 1}: a tool call needs a string id and name")
    return {"id": call["id"], "type": "tool", "name": function["name"], "arguments": arguments}


def _observation(message: Mapping[str, Any], n: int) -> dict[str, Any]:
    caused_by = message.get("tool_call_id")
    if not isinstance(caused_by, str):
        raise ValueError(f"message {n + 1}: a tool message needs tool_call_id")
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return {"caused_by": caused_by, "ok": True, "content": content}


def _parts(content: Any, n: int) -> tuple[Part, ...]:
    """Message content: a string, or a list of parts: `{"type": "text", "text"}` and
    `{"type": "tokens", "ids": […], "modality": "image"}` (other modalities come as their
    codec's ids: the seed puts modality in token namespaces, not in structure)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (content,) if content else ()
    if not isinstance(content, list):
        raise ValueError(f"message {n + 1}: content is a string or a list of parts")
    parts: list[Part] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif kind == "tokens" and isinstance(part.get("ids"), list):
            parts.append(TokenRun(tuple(part["ids"]), part.get("modality")))
        else:
            raise ValueError(
                f"message {n + 1}: a content part of type {kind!r}: give text, or the "
                'modality\'s token ids as {"type": "tokens", "ids": […]}'
            )
    return tuple(p for p in parts if p != "")


# -- the native form -------------------------------------------------------------------------

_BLOCK_KEYS = {"type", "text", "json", "parts"}


def from_native(value: Any) -> list[Transmission]:
    """`{"transmissions": [[block, …], …]}` (or the bare list) as transmissions. A block is
    `{"type": "usr", "text": "…"}`, `{"type": "act", "json": {…}}` (rendered canonically) or
    `{"type": "usr", "parts": [{"text": "…"}, {"tokens": [1, 2], "modality": "image"}]}`."""
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"transmissions"})
        if unknown:
            raise ValueError(f"unknown keys: {', '.join(unknown)}")
        value = value.get("transmissions")
    if not isinstance(value, list):
        raise ValueError("a conversation is a list of transmissions")
    out = []
    for t, blocks in enumerate(value):
        if not isinstance(blocks, list):
            raise ValueError(f"transmission {t + 1} is not a list of blocks")
        out.append(Transmission(tuple(_native_block(b, t, i) for i, b in enumerate(blocks))))
    return out


def _native_block(value: Any, t: int, i: int) -> Block:
    where = f"transmission {t + 1}, block {i + 1}"
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} is not an object")
    unknown = sorted(set(value) - _BLOCK_KEYS)
    payloads = [k for k in ("text", "json", "parts") if k in value]
    if unknown:
        raise ValueError(f"{where}: unknown keys: {', '.join(unknown)}")
    if len(payloads) > 1:
        raise ValueError(f"{where}: give one of text, json or parts")
    try:
        kind = Kind.from_tag(str(value.get("type")))
        if "json" in value:
            return Block.of(kind, canonical_json(value["json"]))
        if "parts" in value:
            return Block(kind, _native_parts(value["parts"]))
        text = value.get("text", "")
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        return Block.of(kind, text)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _native_parts(value: Any) -> tuple[Part, ...]:
    if not isinstance(value, list):
        raise ValueError("parts must be a list")
    parts: list[Part] = []
    for part in value:
        if isinstance(part, Mapping) and set(part) == {"text"} and isinstance(part["text"], str):
            parts.append(part["text"])
        elif isinstance(part, Mapping) and "tokens" in part and set(part) <= {"tokens", "modality"}:
            if not isinstance(part["tokens"], list):
                raise ValueError("tokens must be a list of ids")
            parts.append(TokenRun(tuple(part["tokens"]), part.get("modality")))
        else:
            raise ValueError('a part is {"text": …} or {"tokens": […], "modality": …}')
    return tuple(p for p in parts if p != "")


def to_native(transmissions: Sequence[Transmission]) -> dict[str, Any]:
    """The native form of transmissions (what `smllm smi parse --json` prints)."""
    out = []
    for transmission in transmissions:
        blocks: list[dict[str, Any]] = []
        for block in transmission.blocks:
            if block.is_text:
                blocks.append({"type": block.kind.tag, "text": block.text})
            else:
                parts = [
                    {"text": p}
                    if isinstance(p, str)
                    else {"tokens": list(p.ids), **({"modality": p.modality} if p.modality else {})}
                    for p in block.parts
                ]
                blocks.append({"type": block.kind.tag, "parts": parts})
        out.append(blocks)
    return {"transmissions": out}
