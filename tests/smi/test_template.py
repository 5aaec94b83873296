"""The SMI chat template's `{% generation %}` markers: transformers' assistant mask from
`apply_chat_template(…, return_assistant_tokens_mask=True)` equals the compiler's
`assistant_mask`, on every fixture family (ByteLevel, Metaspace first/always, WordPiece), for
conversations with thinking, tool calls, several turns, a model that speaks first or twice in
a row, and random ones."""

from __future__ import annotations

import random
from typing import Any

import pytest
from helpers.smi_conversations import random_messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smllm.smi.compile import Compiler
from smllm.smi.convert import from_messages
from smllm.smi.template import CHAT_TEMPLATE
from smllm.smi.tokens import Kind
from smllm.smi.vocab.encode import PlainEncoder

from .conftest import Installed

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
CTRL = {"reasoning": {"mode": "adaptive", "effort": "low", "max_tokens": 1000}}


def call(call_id: str, path: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": "read", "arguments": {"path": path}}}


CONVERSATIONS: dict[str, tuple[list[dict[str, Any]], Any, Any]] = {
    "thinking and a tool call": (
        [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the test, please."},
            {
                "role": "assistant",
                "reasoning_content": "Read it first.",
                "tool_calls": [call("a1", "src/auth.ts")],
            },
            {"role": "tool", "tool_call_id": "a1", "content": "def f(): pass"},
            {"role": "assistant", "content": "Done.\n"},
        ],
        TOOLS,
        CTRL,
    ),
    "several turns, two calls": (
        [
            {"role": "user", "content": "hello  world"},
            {"role": "assistant", "content": "  hi  "},
            {"role": "user", "content": [{"type": "text", "text": "read two"}]},
            {"role": "assistant", "tool_calls": [call("b1", "a"), call("b2", "b")]},
            {"role": "tool", "tool_call_id": "b1", "content": "1"},
            {"role": "tool", "tool_call_id": "b2", "content": "2"},
            {"role": "assistant", "reasoning_content": "both\n\n", "content": "1 and 2"},
        ],
        TOOLS,
        None,
    ),
    "the model first, then twice in a row": (
        [
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Café? 漢字 🙂"},
            {"role": "assistant", "content": "Oui."},
            {"role": "assistant", "content": "Encore."},
        ],
        None,
        CTRL,
    ),
}


def masks(installed: Installed, messages: Any, tools: Any, ctrl: Any) -> tuple[Any, Any]:
    """(the template's ids and mask, the compiler's ids and mask)."""
    tok = installed.tokenizer
    tok.chat_template = CHAT_TEMPLATE
    out = tok.apply_chat_template(
        messages,
        tools=tools,
        smi_ctrl=ctrl,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    encoder = PlainEncoder.from_tokenizer(tok, installed.ids)
    compiled = Compiler(encoder, installed.ids).compile(from_messages(messages, tools, ctrl))
    return (list(out["input_ids"]), list(out["assistant_masks"])), (
        compiled.ids,
        compiled.assistant_mask,
    )


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_the_templates_assistant_mask_is_the_compilers(smi_tokenizer: Installed, name: str) -> None:
    template, compiler = masks(smi_tokenizer, *CONVERSATIONS[name])
    assert template == compiler
    ids, mask = compiler
    # the mask covers the model's blocks and its <|eot|>, never the "\n" after that <|eot|>
    # (WordPiece drops that "\n": the next id is then the next block's)
    smi = smi_tokenizer.ids
    assert all(mask[n] for n, i in enumerate(ids) if smi.kind_of(i) in (Kind.THINK, Kind.OUT))
    model_eots = [n for n, i in enumerate(ids) if i == smi[Kind.EOT] and mask[n]]
    assert model_eots
    after = [ids[n + 1] for n in model_eots if n + 1 < len(ids) and mask[n + 1]]
    assert all(i in smi.structural for i in after)


def test_the_mask_holds_exactly_the_models_tokens(smi_tokenizer: Installed) -> None:
    """The masked ids, decoded, are the model's transmissions as the text form writes them."""
    messages, tools, ctrl = CONVERSATIONS["thinking and a tool call"]
    (ids, mask), _ = masks(smi_tokenizer, messages, tools, ctrl)
    model = [i for i, m in zip(ids, mask, strict=True) if m]
    structure = [smi_tokenizer.ids.kind_of(i) for i in model if i in smi_tokenizer.ids.structural]
    assert structure == [Kind.THINK, Kind.ACT, Kind.EOT, Kind.OUT, Kind.EOT]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_conversations_masks_agree(smi_tokenizer: Installed, seed: int) -> None:
    rng = random.Random(seed)
    messages, tools = random_messages(rng)
    ctrl = CTRL if rng.random() < 0.5 else None
    template, compiler = masks(smi_tokenizer, messages, tools, ctrl)
    assert template == compiler
