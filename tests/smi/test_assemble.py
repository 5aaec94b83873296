"""`assemble.hf_runtime`: a transformers model and tokenizer to a working runtime in one call."""

from __future__ import annotations

import asyncio

import pytest
from helpers.smi_runtime import tiny_model

from smllm.smi.assemble import hf_runtime
from smllm.smi.backends import Sampler
from smllm.smi.stream import Block, Transmission
from smllm.smi.tokens import MODEL_SIDE, Kind

from .conftest import build_installed, build_tokenizer

ASK = Transmission.of(
    [
        Block.of("ctrl", {"reasoning": {"mode": "fixed", "max_tokens": 3}}),
        Block.of("usr", "Fix the failing test."),
    ]
)


def test_install_grows_the_model_and_a_turn_runs() -> None:
    tokenizer = build_tokenizer("bytelevel")
    model = tiny_model("mamba", vocab=len(tokenizer))
    runtime = hf_runtime(model, tokenizer, install=True, max_new_tokens=24)
    ids = runtime.ids
    assert model.get_input_embeddings().weight.shape[0] >= ids.ids[-1] + 1
    result = asyncio.run(runtime.session().turn(ASK))
    assert result.prompt_tokens > 0 and result.generated
    speakable = {ids[k] for k in (*MODEL_SIDE, Kind.EOT)}
    assert all(i in speakable or i not in runtime.forbid for i in result.generated)
    assert result.generated[-1] == ids[Kind.EOT]


def test_padded_rows_and_the_tokenizers_specials_are_never_generated() -> None:
    installed = build_installed("bytelevel")
    tokenizer = installed.tokenizer
    padded = len(tokenizer) + 40  # a matrix padded past the tokenizer, as many are
    model = tiny_model("gpt2", vocab=padded)
    runtime = hf_runtime(model, tokenizer, sampler=Sampler(temperature=2.0), max_new_tokens=40)
    assert set(range(len(tokenizer), padded)) <= runtime.forbid
    assert tokenizer.convert_tokens_to_ids("<tool_call>") in runtime.forbid
    assert installed.ids[Kind.SYS] in runtime.forbid
    assert installed.ids[Kind.THINK] not in runtime.forbid
    for seed in range(6):
        result = asyncio.run(runtime.session(seed=seed).turn(ASK))
        assert not set(result.generated) & runtime.forbid, seed


def test_without_tokens_and_without_install() -> None:
    tokenizer = build_tokenizer("bytelevel")
    with pytest.raises(ValueError, match="the SMI tokens are not installed"):
        hf_runtime(tiny_model("mamba", vocab=len(tokenizer)), tokenizer)
