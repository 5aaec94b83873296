"""Conversations in (smllm.smi.convert) and the canonical text form (render)."""

from __future__ import annotations

from typing import Any

import pytest

from smllm.smi.convert import from_messages, from_native, to_native
from smllm.smi.render import render_text
from smllm.smi.stream import Block, TokenRun, Transmission, check
from smllm.smi.tokens import Kind

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "developer", "content": "Run tests after changes."},
    {"role": "user", "content": "Fix the test."},
    {
        "role": "assistant",
        "reasoning_content": "Look first.",
        "tool_calls": [
            {
                "id": "a1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            },
            {
                "id": "a2",
                "type": "function",
                "function": {"name": "bash", "arguments": {"command": "pwd"}},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "a2", "content": "/repo"},
    {"role": "tool", "tool_call_id": "a1", "content": [{"type": "text", "text": "a.py"}]},
    {"role": "user", "content": "Also check b.py"},
    {"role": "assistant", "content": "Done."},
]

EXPECTED = (
    "<|ctrl|>\n"
    '{"reasoning":{"mode":"fixed","max_tokens":64}}\n'
    "<|sys|>\nYou are a coding agent.\n"
    "<|dev|>\nRun tests after changes.\n"
    "<|caps|>\n"
    '{"tools":[{"name":"bash","description":"Run a command.","parameters":{"type":"object",'
    '"properties":{"command":{"type":"string"}}}}]}\n'
    "<|usr|>\nFix the test.\n"
    "<|eot|>\n"
    "<|think|>\nLook first.\n"
    '<|act|>\n{"id":"a1","type":"tool","name":"bash","arguments":{"command":"ls"}}\n'
    '<|act|>\n{"id":"a2","type":"tool","name":"bash","arguments":{"command":"pwd"}}\n'
    "<|eot|>\n"
    '<|obs|>\n{"caused_by":"a2","ok":true,"content":"/repo"}\n'
    '<|obs|>\n{"caused_by":"a1","ok":true,"content":"a.py"}\n'
    "<|eot|>\n"
    "<|usr|>\nAlso check b.py\n"
    "<|eot|>\n"
    "<|out|>\nDone.\n"
    "<|eot|>\n"
)


def test_openai_messages_render_exactly() -> None:
    conversation = from_messages(
        MESSAGES, TOOLS, {"reasoning": {"mode": "fixed", "max_tokens": 64}}
    )
    assert render_text(conversation) == EXPECTED
    # OBS then a new USR: two runtime transmissions in a row
    assert [tr.side for tr in conversation] == ["runtime", "model", "runtime", "runtime", "model"]
    check(conversation)


def test_head_alone_when_the_model_speaks_first() -> None:
    conversation = from_messages([{"role": "assistant", "content": "Hi."}], ctrl={"a": 1})
    assert render_text(conversation) == '<|ctrl|>\n{"a":1}\n<|eot|>\n<|out|>\nHi.\n<|eot|>\n'


def test_token_parts() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Describe "},
            {"type": "tokens", "ids": [7, 8], "modality": "image"},
            {"type": "text", "text": " aloud."},
        ],
    }
    (transmission,) = from_messages([message])
    assert transmission.blocks == (
        Block(Kind.USR, ("Describe ", TokenRun((7, 8), "image"), " aloud.")),
    )
    with pytest.raises(ValueError, match="a token run has no text form"):
        render_text([transmission])


@pytest.mark.parametrize(
    "messages, message",
    [
        ([{"role": "robot", "content": "x"}], "message 1: unknown role 'robot'"),
        (["hi"], "message 1 is not an object"),
        ([{"role": "assistant"}], "an assistant message with nothing in it"),
        ([{"role": "tool", "content": "x"}], "a tool message needs tool_call_id"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}],
            "a content part of type 'image_url'",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}],
                }
            ],
            "tool call arguments aren't JSON",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
            "a tool call needs a string id and name",
        ),
    ],
)
def test_bad_messages(messages: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("'", "'")):
        from_messages(messages)


NATIVE = {
    "transmissions": [
        [
            {"type": "sys", "text": "Be safe."},
            {"type": "usr", "parts": [{"text": "Look: "}, {"tokens": [3, 4], "modality": "image"}]},
        ],
        [{"type": "act", "json": {"id": "a1", "type": "tool", "name": "f", "arguments": {}}}],
    ]
}


def test_native_round_trip() -> None:
    conversation = from_native(NATIVE)
    assert conversation[0].blocks[1].parts == ("Look: ", TokenRun((3, 4), "image"))
    assert conversation[1].blocks[0].text == '{"id":"a1","type":"tool","name":"f","arguments":{}}'
    again = to_native(conversation)
    assert again["transmissions"][0] == NATIVE["transmissions"][0]
    assert from_native(again) == conversation


@pytest.mark.parametrize(
    "value, message",
    [
        ({"transmissions": [], "x": 1}, "unknown keys: x"),
        ({"transmissions": "no"}, "a conversation is a list of transmissions"),
        ([{"type": "usr"}], "transmission 1 is not a list of blocks"),
        ([[{"type": "usr", "text": "a", "json": 1}]], "give one of text, json or parts"),
        ([[{"type": "usr", "txt": "a"}]], "transmission 1, block 1: unknown keys: txt"),
        ([[{"type": "picture", "text": "a"}]], "'picture' is not an SMI block type"),
        ([[{"type": "usr", "text": 3}]], "text must be a string"),
        ([[{"type": "usr", "parts": [{"tokens": [-1]}]}]], "non-negative integer ids"),
        ([[{"type": "usr", "parts": [{"image": 1}]}]], "a part is"),
    ],
)
def test_bad_native(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        from_native(value)
    assert message in str(caught.value)


def test_render_framing() -> None:
    conversation = [
        Transmission.of([Block.of("usr", ""), Block.of("usr", "\n\nx ")]),
        Transmission.of([Block.of("out", "y")]),
    ]
    assert render_text(conversation) == "<|usr|>\n\n<|usr|>\n\n\nx \n<|eot|>\n<|out|>\ny\n<|eot|>\n"
