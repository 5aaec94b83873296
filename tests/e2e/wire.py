"""The fake model's replies in the three streaming formats the clients speak: Anthropic Messages
(Claude Code), OpenAI Responses (Codex) and OpenAI Chat Completions (Copilot, OpenCode).

Each encoder turns one reply (text and tool calls) into the SSE events, as (event name or None,
JSON data) pairs; the server writes them as `event:`/`data:` lines."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

Event = tuple[str | None, Any]  # SSE event name (None: a bare data line), its data

#: a Responses-API namespaced tool, as a single name: "<namespace>::<function>" (Codex MCP)
NAMESPACE = "::"


@dataclass(frozen=True)
class ToolCall:
    name: str  # resolved against the request's tools
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    text: str
    calls: tuple[ToolCall, ...]


def _id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:20]


def anthropic(reply: Reply, model: str) -> list[Event]:
    """POST /v1/messages with "stream": true."""
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        blocks.append(
            {"type": "tool_use", "id": _id("toolu_"), "name": call.name, "input": call.arguments}
        )
    stop = "tool_use" if reply.calls else "end_turn"
    usage = {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    start = {
        "id": _id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": first},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": i}),
        ]
    end = {"stop_reason": stop, "stop_sequence": None}
    events += [
        ("message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def chat(reply: Reply, model: str) -> list[Event]:
    """POST /v1/chat/completions with "stream": true."""
    base = {"id": _id("chatcmpl-"), "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        events.append(chunk({"content": reply.text}))
    for i, call in enumerate(reply.calls):
        head = {"index": i, "id": _id("call_"), "type": "function"}
        events.append(
            chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        )
        args = {"arguments": json.dumps(call.arguments)}
        events.append(chunk({"tool_calls": [{"index": i, "function": args}]}))
    events.append(chunk({}, "tool_calls" if reply.calls else "stop"))
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    events.append((None, {**base, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return events


def responses(reply: Reply, model: str) -> list[Event]:
    """POST /v1/responses with "stream": true; a namespaced tool's call names its namespace."""
    items: list[dict[str, Any]] = []
    if reply.text:
        part = {"type": "output_text", "text": reply.text, "annotations": []}
        items.append(
            {
                "type": "message",
                "id": _id("msg_"),
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for call in reply.calls:
        item = {
            "type": "function_call",
            "id": _id("fc_"),
            "status": "completed",
            "call_id": _id("call_"),
            "name": call.name,
            "arguments": json.dumps(call.arguments),
        }
        if NAMESPACE in call.name:
            item["namespace"], item["name"] = call.name.split(NAMESPACE, 1)
        items.append(item)
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    done = {
        "id": _id("resp_"),
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": items,
        "usage": usage,
    }
    running = {**done, "status": "in_progress", "output": [], "usage": None}
    raw: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": running}),
        ("response.in_progress", {"response": running}),
    ]
    for i, item in enumerate(items):
        at = {"output_index": i, "item_id": item["id"]}
        if item["type"] == "message":
            part = item["content"][0]
            raw += [
                (
                    "response.output_item.added",
                    {"output_index": i, "item": {**item, "status": "in_progress", "content": []}},
                ),
                (
                    "response.content_part.added",
                    {**at, "content_index": 0, "part": {**part, "text": ""}},
                ),
                ("response.output_text.delta", {**at, "content_index": 0, "delta": part["text"]}),
                ("response.output_text.done", {**at, "content_index": 0, "text": part["text"]}),
                ("response.content_part.done", {**at, "content_index": 0, "part": part}),
            ]
        else:
            raw += [
                (
                    "response.output_item.added",
                    {"output_index": i, "item": {**item, "status": "in_progress", "arguments": ""}},
                ),
                ("response.function_call_arguments.delta", {**at, "delta": item["arguments"]}),
                ("response.function_call_arguments.done", {**at, "arguments": item["arguments"]}),
            ]
        raw.append(("response.output_item.done", {"output_index": i, "item": item}))
    raw.append(("response.completed", {"response": done}))
    return [
        (name, {**data, "type": name, "sequence_number": n}) for n, (name, data) in enumerate(raw)
    ]


ENCODERS = {"anthropic": anthropic, "chat": chat, "responses": responses}


def api_of(path: str) -> str | None:
    """Which API a POST path speaks: anthropic, chat, responses; None for any other."""
    path = path.split("?")[0]
    for suffix, api in (
        ("/messages", "anthropic"),
        ("/chat/completions", "chat"),
        ("/responses", "responses"),
    ):
        if path.endswith(suffix):
            return api
    return None


def tool_names(body: dict[str, Any]) -> list[str]:
    """The tools a request offers, a Responses namespace's as "<namespace>::<function>"."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names += [
                tool["name"] + NAMESPACE + sub["name"]
                for sub in tool.get("tools") or []
                if isinstance(sub, dict) and "name" in sub
            ]
        elif isinstance(tool.get("name"), str):
            names.append(tool["name"])
        elif isinstance(tool.get("function"), dict):
            names.append(tool["function"].get("name", ""))
    return [n for n in names if n]


def resolve(name: str, offered: list[str]) -> str | None:
    """The offered tool a script's name means: the exact name, else the one that ends with
    `::NAME` (a Codex MCP namespace), `__NAME` (Claude), `-NAME` (Copilot) or `_NAME`
    (OpenCode); None when none does."""
    if name in offered:
        return name
    for sep in (NAMESPACE, "__", "-", "_"):
        for tool in offered:
            if tool.endswith(sep + name):
                return tool
    return None
