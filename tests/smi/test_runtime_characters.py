"""A budget cut never leaves a broken character: tiny random models sampling freely over
ByteLevel vocabularies (GPT-2 style, GPT-NeoX style) whose corpus holds CJK and emoji, under
tight THINK budgets, through `hf_runtime` (which hands the budget the vocabulary's bytes);
without those bytes the same turns do end THINK inside a character. On a byte-fallback
(Llama-style) vocabulary, whose `<0xNN>` ids are forbidden to the model here (the test
tokenizer declares them special), the budget is driven over the real vocabulary by a model
that wants an emoji byte by byte."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.smi_runtime import run, think_payload, tiny_model

from smi.conftest import build_installed
from smllm.smi.assemble import hf_runtime
from smllm.smi.backends import Sampler
from smllm.smi.budget import BudgetProcessor
from smllm.smi.stream import Block, Reasoning, Transmission
from smllm.smi.tokens import Kind


def ask(max_tokens: int) -> Transmission:
    reasoning = {"mode": "fixed", "max_tokens": max_tokens}
    return Transmission.of([Block.of("ctrl", {"reasoning": reasoning}), Block.of("usr", "漢字?")])


def think_ends(family: str, whole: bool) -> list[tuple[str, int, int]]:
    """(the last THINK text, its THINK ids, the limit) of each sampled turn with THINK."""
    torch.set_num_threads(1)
    inst = build_installed(family)
    model = tiny_model("mamba2", vocab=len(inst.tokenizer), seed=3)
    options: dict[str, Any] = {} if whole else {"characters": None}
    rt = hf_runtime(
        model, inst.tokenizer, sampler=Sampler(temperature=3.0), max_new_tokens=12, **options
    )
    out = []
    for seed in range(60):
        limit = 1 + seed % 5
        result = run(rt.session(seed=seed).turn(ask(limit)))
        thinks = [b.text for b in result.model.blocks if b.kind is Kind.THINK]
        if thinks:
            out.append((thinks[-1], think_payload(result.generated, inst.ids), limit))
    return out


@pytest.mark.parametrize("family", ["bytelevel", "neox"])
def test_a_think_cut_ends_on_a_whole_character(family: str) -> None:
    ends = think_ends(family, whole=True)
    assert len(ends) >= 20
    assert all(count <= limit for _, count, limit in ends)
    assert not [text for text, _, _ in ends if text.endswith("\ufffd")]
    broken = think_ends(family, whole=False)
    assert [text for text, _, _ in broken if text.endswith("\ufffd")]  # the case is real


def test_a_byte_fallback_vocabularys_bytes_reach_the_budget() -> None:
    inst = build_installed("llama")
    tok, ids = inst.tokenizer, inst.ids
    rt = hf_runtime(tiny_model("mamba2", vocab=len(tok)), tok)
    chars = rt.characters
    assert chars is not None
    byte = {b: tok.convert_tokens_to_ids(f"<0x{b:02X}>") for b in "😀".encode()}
    shapes = chars.shapes()
    assert shapes[byte[0xF0]] == (0, 3, False, False)
    assert shapes[byte[0x80]] == (1, 0, True, False)
    assert shapes[tok.convert_tokens_to_ids("▁test")] == (0, 0, False, False)
    emoji = [byte[b] for b in "😀".encode()]
    a = tok.convert_tokens_to_ids("a")
    bytes_of = {a: b"a", **{i: bytes([b]) for b, i in byte.items()}}
    for limit in range(1, 9):
        budget = BudgetProcessor(ids, Reasoning("fixed", None, limit), characters=chars)
        budget.observe(ids[Kind.THINK])
        data = b""
        for step in range(12):
            # the emoji's next byte if allowed, else leave THINK, else a whole "a"
            token = next(i for i in (emoji[step % 4], ids[Kind.OUT], a) if budget.allows(i))
            budget.observe(token)
            if token == ids[Kind.OUT]:
                break
            data += bytes_of[token]
        assert data.decode("utf-8") == ("😀" * (limit // 4) or "a")
