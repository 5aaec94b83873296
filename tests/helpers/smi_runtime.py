"""Shared helpers of the SMI runtime tests: tiny random models, a toy tokenizer with the SMI
block installed (conftest's ByteLevel BPE) and a runtime over it, transmissions, ACT scripts
and a recording action runner."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import transformers
from smi.conftest import build_installed

from smllm.smi.backends import Sampler
from smllm.smi.backends.scripted import ScriptedBackend
from smllm.smi.budget import BudgetProcessor
from smllm.smi.compile import Compiler
from smllm.smi.parser import StreamParser
from smllm.smi.runtime import Runtime, TurnResult
from smllm.smi.stream import Block, Reasoning, Transmission
from smllm.smi.tokens import MODEL_SIDE, Kind, TokenIds
from smllm.smi.vocab.decode import decoder_for
from smllm.smi.vocab.encode import PlainEncoder

#: the backend tests' toy vocabulary: 64 "text" ids, then the SMI block
TEXT_VOCAB = 64
VOCAB = TEXT_VOCAB + 32
IDS = TokenIds.contiguous(TEXT_VOCAB)


def tiny_model(family: str, vocab: int = VOCAB, seed: int = 0, positions: int = 4096) -> Any:
    """A random-initialised tiny causal LM of `family` (the same weights for the same seed);
    `positions` bounds a KV model's context (GPT-2, Llama)."""
    torch.manual_seed(seed)
    t = transformers
    if family == "mamba":
        model = t.MambaForCausalLM(
            t.MambaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, state_size=8)
        )
    elif family == "mamba2":
        config = t.Mamba2Config(
            vocab_size=vocab,
            hidden_size=32,
            num_hidden_layers=2,
            state_size=8,
            num_heads=4,
            head_dim=16,
            n_groups=1,
            expand=2,
            chunk_size=16,
        )
        model = t.Mamba2ForCausalLM(config)
    elif family == "rwkv":
        config = t.RwkvConfig(
            vocab_size=vocab,
            hidden_size=32,
            num_hidden_layers=2,
            attention_hidden_size=32,
            intermediate_size=64,
            context_length=4096,
        )
        model = t.RwkvForCausalLM(config)
    elif family == "gpt2":
        config = t.GPT2Config(
            vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=positions, bos_token_id=0
        )
        config.eos_token_id = 0
        model = t.GPT2LMHeadModel(config)
    elif family == "llama":
        config = t.LlamaConfig(
            vocab_size=vocab,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=64,
            max_position_embeddings=positions,
        )
        model = t.LlamaForCausalLM(config)
    else:
        raise ValueError(family)
    return model.eval()


_MODELS: dict[str, Any] = {}


def shared_model(family: str) -> Any:
    """One model per family for the whole test session (read-only use only)."""
    if family not in _MODELS:
        _MODELS[family] = tiny_model(family)
    return _MODELS[family]


def think_payload(generated: Sequence[int], ids: TokenIds) -> int:
    """THINK payload ids in a generated turn, counted independently of the processor."""
    count, inside = 0, False
    for i in generated:
        kind = ids.kind_of(i)
        if kind is not None:
            inside = kind is Kind.THINK
        elif inside:
            count += 1
    return count


class Toy(NamedTuple):
    tokenizer: Any
    ids: TokenIds
    encoder: PlainEncoder
    compiler: Compiler

    @property
    def vocab(self) -> int:
        return len(self.tokenizer)

    def enc(self, text: str) -> list[int]:
        return self.encoder.encode(text)


@functools.cache
def toy() -> Toy:
    inst = build_installed("bytelevel")
    encoder = PlainEncoder.from_tokenizer(inst.tokenizer, inst.ids)
    return Toy(inst.tokenizer, inst.ids, encoder, Compiler(encoder, inst.ids))


def runtime(backend: Any, compiler: Any = None, **kw: Any) -> Runtime:
    t = toy()
    model_side = {t.ids[k] for k in (*MODEL_SIDE, Kind.EOT)}

    def parser(reasoning: Reasoning | None) -> StreamParser:
        return StreamParser(t.ids, decoder_for(t.tokenizer), side="model", reasoning=reasoning)

    return Runtime(
        backend,
        compiler or t.compiler,
        parser,
        t.ids,
        forbid=t.encoder.forbidden - model_side,
        **kw,
    )


READ_FILE = {
    "name": "read_file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}


def first(max_tokens: int | None = 4, mode: str = "fixed") -> Transmission:
    return Transmission.of(
        [
            Block.of(
                "ctrl", {"reasoning": {"mode": mode, "effort": "low", "max_tokens": max_tokens}}
            ),
            Block.of("sys", "You are a coding agent."),
            Block.of("caps", {"tools": [READ_FILE]}),
            Block.of("usr", "Fix the failing authentication test."),
        ]
    )


def follow(result: TurnResult, text: str = "Run relevant tests after changes.") -> Transmission:
    """The next runtime transmission: a user line, then the OBS the runtime made (if any)."""
    obs = result.obs.blocks if result.obs is not None else ()
    return Transmission.of([Block.of("usr", text), *obs])


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def act_ids(t: Toy, *actions: dict[str, Any]) -> list[int]:
    out: list[int] = []
    for action in actions:
        out += [t.ids[Kind.ACT], *t.enc("\n" + json.dumps(action, separators=(",", ":")) + "\n")]
    return [*out, t.ids[Kind.EOT]]


def read(aid: str, path: str) -> dict[str, Any]:
    return {"id": aid, "type": "tool", "name": "read_file", "arguments": {"path": path}}


def obs_payloads(result: TurnResult) -> list[dict[str, Any]]:
    assert result.obs is not None
    assert all(b.kind is Kind.OBS for b in result.obs.blocks)
    return [json.loads(b.text) for b in result.obs.blocks]


class Recorder:
    """An ActionRunner that sleeps per path and logs starts and ends."""

    def __init__(self, delays: dict[str, float]) -> None:
        self.delays = delays
        self.log: list[tuple[str, str]] = []

    async def run(self, action: Any, session: Any) -> tuple[bool, Any]:
        path = action.arguments["path"]
        self.log.append(("start", action.id))
        await asyncio.sleep(self.delays.get(path, 0.0))
        self.log.append(("end", action.id))
        if path == "boom":
            raise OSError("disk on fire")
        return True, f"contents of {path}"


class Engine(ScriptedBackend):
    """A backend that runs the token loop itself (as a serving engine would), optionally
    ignoring the budget and the constraint it is handed."""

    honest = True

    def generate_turn(
        self,
        state: Any,
        prompt: Any,
        budget: BudgetProcessor,
        sampler: Sampler,
        rng: Any,
        max_new_tokens: int,
        constraint: Any = None,
    ) -> list[int]:
        logits = self.feed(state, prompt)
        out: list[int] = []
        for _ in range(max_new_tokens):
            masked = budget.apply(logits) if self.honest else logits
            if constraint is not None and self.honest:
                masked = constraint.apply(masked)
            token = sampler.pick(masked, rng)
            if self.honest:
                budget.observe(token)
                if constraint is not None:
                    constraint.observe(token)
            out.append(token)
            logits = self.feed(state, [token])
            if token == toy().ids[Kind.EOT]:
                break
        return out
