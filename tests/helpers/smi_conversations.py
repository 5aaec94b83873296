"""Random OpenAI-style conversations for the SMI tests (the compiler, the chat template and its
assistant mask): every role and content form, text from conftest's corpus words."""

from __future__ import annotations

import random
from typing import Any

from smi.conftest import WORDS

from smllm.smi.convert import from_messages
from smllm.smi.stream import Transmission

__all__ = ["random_conversation", "random_messages", "random_text"]


def random_text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, 8))]
    seps = ["", " ", "\n", "  ", "\n\n", " \n", ". "]
    return "".join(w + rng.choice(seps) for w in words)


def random_messages(rng: random.Random) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """OpenAI-style messages of every role and content form, random text from the corpus;
    sometimes the model speaks first, sometimes tool results come before a new user message."""
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.7:
        messages.append({"role": "system", "content": random_text(rng)})
    if rng.random() < 0.4:
        messages.append({"role": "developer", "content": random_text(rng)})
    if rng.random() < 0.15:
        messages.insert(0, {"role": "assistant", "content": "Hello."})
    for turn in range(rng.randint(1, 3)):
        content: Any = random_text(rng)
        if rng.random() < 0.3:
            content = [{"type": "text", "text": random_text(rng)} for _ in range(2)]
        messages.append({"role": "user", "content": content})
        reply: dict[str, Any] = {"role": "assistant", "content": random_text(rng) or "ok"}
        if rng.random() < 0.5:
            reply["reasoning_content"] = random_text(rng)
        calls = [
            {"id": f"c{turn}{n}", "function": {"name": rng.choice(WORDS), "arguments": {"x": n}}}
            for n in range(rng.randint(0, 2))
        ]
        if calls:
            reply["tool_calls"] = calls
        messages.append(reply)
        for call in calls:
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": random_text(rng)}
            )
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    return messages, (tools if rng.random() < 0.6 else None)


def random_conversation(rng: random.Random) -> list[Transmission]:
    return from_messages(*random_messages(rng))
