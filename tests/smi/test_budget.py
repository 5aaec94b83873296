"""The reasoning budget at generation time: the rules as a state machine, then generation under
greedy and sampling (many seeds, temperature >= 1, no top-k) on tiny random models and on a
scripted model that wants to think for ever. Counts are made from the generated ids by the
test itself, not read back from the processor."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.smi_runtime import IDS, TEXT_VOCAB, VOCAB, shared_model, think_payload

from smllm.smi.backends import GREEDY, Sampler
from smllm.smi.backends.hf import HFBackend
from smllm.smi.backends.scripted import ScriptedBackend
from smllm.smi.budget import BudgetProcessor, Characters, Phase
from smllm.smi.stream import Reasoning
from smllm.smi.tokens import RUNTIME_SIDE, Kind

THINK, OUT, ACT, EOT = IDS[Kind.THINK], IDS[Kind.OUT], IDS[Kind.ACT], IDS[Kind.EOT]
RUNTIME_IDS = {IDS[k] for k in RUNTIME_SIDE}
RESERVED_IDS = set(IDS.ids[10:])
NEVER = RUNTIME_IDS | RESERVED_IDS
TEXT = 5


def fixed(n: int | None) -> Reasoning:
    return Reasoning("fixed", "medium", n)


def feed_all(budget: BudgetProcessor, ids: list[int]) -> None:
    for i in ids:
        budget.observe(i)


def test_first_token_is_a_model_block_and_runtime_ids_are_never_allowed() -> None:
    budget = BudgetProcessor(IDS, None)
    assert budget.phase is Phase.START
    allowed = {i for i, ok in enumerate(budget.allowed_mask(VOCAB)) if ok}
    assert allowed == {THINK, OUT, ACT}  # no text without a block, no empty transmission
    budget.observe(OUT)
    assert not budget.allows(EOT) and not budget.allows(ACT)  # a block gets a payload id first
    budget.observe(TEXT)
    allowed = {i for i, ok in enumerate(budget.allowed_mask(VOCAB)) if ok}
    assert allowed == set(range(VOCAB)) - NEVER
    budget.observe(EOT)
    assert budget.phase is Phase.DONE
    with pytest.raises(ValueError, match="turn is over"):
        budget.observe(TEXT)
    budget.reset(fixed(2))
    with pytest.raises(ValueError, match="not allowed"):
        budget.observe(IDS[Kind.SYS])


def test_max_tokens_counts_every_think_block_of_the_turn_then_closes_thinking() -> None:
    budget = BudgetProcessor(IDS, fixed(5))
    feed_all(budget, [THINK, TEXT, TEXT, OUT, TEXT, THINK, TEXT, TEXT])
    assert budget.think_tokens == 4 and budget.allows(TEXT) and budget.allows(EOT)
    budget.observe(TEXT)
    assert budget.think_tokens == 5
    allowed = {i for i, ok in enumerate(budget.allowed_mask(VOCAB)) if ok}
    assert allowed == {OUT, ACT}  # the runtime ends thinking; the model picks how to go on
    feed_all(budget, [ACT, TEXT])
    assert not budget.allows(THINK)  # spent: no THINK again this turn
    assert budget.allows(OUT) and budget.allows(EOT)
    budget.reset(fixed(5))  # a new turn has a new budget
    assert budget.allows(THINK) and budget.think_tokens == 0


@pytest.mark.parametrize(
    ("reasoning", "think_allowed"),
    [
        (Reasoning("disabled"), False),
        (Reasoning("adaptive", "low", 0), False),
        (Reasoning("adaptive", "high", None), True),
        (fixed(None), True),
        (None, True),
    ],
)
def test_disabled_and_zero_never_think_and_no_limit_still_masks(
    reasoning: Reasoning | None, think_allowed: bool
) -> None:
    budget = BudgetProcessor(IDS, reasoning)
    assert budget.allows(THINK) is think_allowed
    budget.observe(THINK if think_allowed else OUT)
    for _ in range(500):
        budget.observe(TEXT)
        assert not any(budget.allows(i) for i in NEVER)
    assert budget.allows(THINK) is think_allowed and budget.allows(OUT)


def test_apply_masks_with_minus_inf_and_leaves_the_rest() -> None:
    budget = BudgetProcessor(IDS, Reasoning("disabled"), extra_forbidden=[3])
    feed_all(budget, [OUT, TEXT])
    logits = torch.randn(1, VOCAB)
    masked = budget.apply(logits)
    mask = torch.tensor(budget.allowed_mask(VOCAB))
    assert masked.shape == (1, VOCAB)
    assert torch.isneginf(masked[0, ~mask]).all()
    assert torch.equal(masked[0, mask], logits[0, mask])
    assert not mask[3] and not mask[THINK] and mask[EOT]
    with pytest.raises(ValueError, match="model-side"):
        BudgetProcessor(IDS, None, extra_forbidden=[EOT])


def generate(
    backend: Any,
    budget: BudgetProcessor,
    sampler: Sampler,
    rng: Any,
    prompt: list[int],
    max_new: int,
) -> list[int]:
    """A bare generation loop (the runtime's, without parsing)."""
    state = backend.new_state()
    logits = backend.feed(state, prompt)
    out: list[int] = []
    for _ in range(max_new):
        token = sampler.pick(budget.apply(logits), rng)
        budget.observe(token)
        out.append(token)
        if token == EOT:
            break
        logits = backend.feed(state, [token])
    return out


PROMPT = [IDS[Kind.USR], 7, 8, 9, EOT, 1]


def think_forever(history: Any, generated: int) -> list[int]:
    """A model that wants to think for ever, and would write runtime-side tokens next."""
    return [THINK, IDS[Kind.SYS], IDS[Kind.OBS], TEXT, EOT]


@pytest.mark.parametrize("max_tokens", [0, 1, 4, 9])
def test_scripted_think_forever_never_exceeds_the_budget(max_tokens: int) -> None:
    backend = ScriptedBackend(VOCAB, think_forever)
    for sampler in (GREEDY, Sampler(temperature=1.0), Sampler(temperature=2.0)):
        for seed in range(40 if not sampler.greedy else 1):
            budget = BudgetProcessor(IDS, fixed(max_tokens))
            out = generate(backend, budget, sampler, sampler.rng(seed), PROMPT, 40)
            assert think_payload(out, IDS) <= max_tokens
            assert not NEVER & set(out)
            if sampler.greedy:  # greedy wants THINK whenever it may: the budget is reached
                assert think_payload(out, IDS) == max_tokens
                assert out.count(THINK) == max_tokens  # one payload id per THINK block
    disabled = generate(
        backend, BudgetProcessor(IDS, Reasoning("disabled")), GREEDY, None, PROMPT, 40
    )
    assert THINK not in disabled and disabled[0] == OUT


@pytest.mark.parametrize("family", ["gpt2", "mamba"])
def test_tiny_random_models_under_sampling_keep_the_budget(family: str) -> None:
    backend = HFBackend(shared_model(family))
    reached = 0
    for seed in range(16):
        max_tokens = seed % 5
        reasoning = Reasoning("disabled") if seed % 6 == 5 else fixed(max_tokens)
        sampler = Sampler(temperature=1.0 + (seed % 3) * 0.5, seed=seed)
        budget = BudgetProcessor(IDS, reasoning)
        out = generate(backend, budget, sampler, sampler.rng(), PROMPT, 24)
        assert not NEVER & set(out)
        assert out[0] in (THINK, OUT, ACT)
        if reasoning.mode == "disabled":
            assert THINK not in out
        else:
            assert think_payload(out, IDS) <= max_tokens
            reached += think_payload(out, IDS) == max_tokens and max_tokens > 0
    assert reached >= 2  # the limit was really met, not only never approached


def test_hf_generate_with_the_budget_as_a_logits_processor() -> None:
    """The transformers plug-in: `generate(logits_processor=[budget.hf()])`, greedy and
    sampling, and one turn spread over two `generate` calls: the budget keeps its own count
    (each call's adapter hands it only that call's new ids, `finish` the last one)."""
    model = shared_model("gpt2")
    for do_sample in (False, True):
        for seed in range(4 if do_sample else 1):
            budget = BudgetProcessor(IDS, fixed(2))
            adapter = budget.hf()
            torch.manual_seed(seed)
            out = model.generate(
                torch.tensor([PROMPT]),
                logits_processor=[adapter],
                eos_token_id=EOT,
                pad_token_id=EOT,
                max_new_tokens=24,
                do_sample=do_sample,
                top_k=0,
                temperature=1.5,
            )
            adapter.finish(out)
            new = out[0, len(PROMPT) :].tolist()
            assert new[0] in (THINK, OUT, ACT) and not NEVER & set(new)
            assert think_payload(new, IDS) <= 2
            assert budget.generated == len(new)
    budget = BudgetProcessor(IDS, fixed(5))
    sequence = torch.tensor([PROMPT])
    for _ in range(3):
        adapter = budget.hf()
        sequence = model.generate(
            sequence,
            logits_processor=[adapter],
            eos_token_id=EOT,
            pad_token_id=EOT,
            max_new_tokens=3,
            do_sample=False,
        )
        adapter.finish(sequence)
        if budget.phase is Phase.DONE:
            break
    new = sequence[0, len(PROMPT) :].tolist()
    assert budget.generated == len(new)
    assert budget.think_tokens == think_payload(new, IDS) <= 5


# -- a cut on a whole character ---------------------------------------------------------------

#: a toy vocabulary's bytes: the emoji 😀 (F0 9F 98 80) byte by byte, whole, and "a"
PIECES = {1: b"\xf0", 2: b"\x9f", 3: b"\x98", 4: b"\x80", 5: b"a", 6: "😀".encode()}


def toy_bytes(token_id: int) -> bytes:
    if token_id >= TEXT_VOCAB:
        raise ValueError("a structural id")
    return PIECES.get(token_id, b"b")


def test_each_ids_utf8_shape() -> None:
    shape = Characters.shape_of
    assert shape("漢".encode()[:2]) == (0, 1, False, False)
    assert shape(b"\xa2") == (1, 0, True, False)
    assert shape(b"\xa2\xa2abc") == (2, 0, False, False)
    assert shape(b"a\xf0\x9f") == (0, 2, False, False)
    assert shape(b"\xff")[3] and shape(b"\xe6a")[3] and shape(b"a\x80")[3]
    chars = Characters(toy_bytes, VOCAB)
    assert chars.horizon == 3 and chars.complete == [0, 1, 2, 3]  # one byte an id
    never = Characters(lambda i: b"\xf0" if i == 1 else b"a", 4)
    assert never.horizon == 0 and never.complete[3] > 3  # nothing completes a character


def think_bytes(budget: BudgetProcessor, wishes: list[int], steps: int) -> tuple[bytes, int]:
    """A model that wants to think `wishes` over and over: the first allowed wish, else the
    lowest allowed id; the THINK bytes and THINK ids generated. The mask `apply` makes and
    `allows` agree at every step."""
    data, count = b"", 0
    budget.observe(THINK)
    for step in range(steps):
        masked = budget.apply(torch.zeros(VOCAB))
        allowed = [i for i in range(VOCAB) if budget.allows(i)]
        assert allowed == [i for i in range(VOCAB) if masked[i] == 0]
        wish = wishes[step % len(wishes)]
        token = wish if wish in allowed else allowed[0]
        budget.observe(token)
        if budget.phase is not Phase.THINK:
            break
        data, count = data + toy_bytes(token), count + 1
    return data, count


def test_think_ends_on_a_whole_character_and_within_its_budget() -> None:
    emoji_by_bytes = [1, 2, 3, 4]
    for limit in range(1, 10):
        chars = Characters(toy_bytes, VOCAB)
        data, count = think_bytes(
            BudgetProcessor(IDS, fixed(limit), characters=chars), emoji_by_bytes, 12
        )
        assert count <= limit
        data.decode("utf-8")  # strict: no part of a character left
        assert count >= limit - 3  # the cut came near the limit, not far before it
    # without the table, a cut breaks the emoji
    data, count = think_bytes(BudgetProcessor(IDS, fixed(2)), emoji_by_bytes, 12)
    assert count == 2 and data == b"\xf0\x9f"
    # mid-character, THINK can't be left (the model chose to stop: it finishes the character)
    budget = BudgetProcessor(IDS, fixed(None), characters=Characters(toy_bytes, VOCAB))
    feed_all(budget, [THINK, 1, 2])
    assert budget.owed == 2 and not budget.allows(OUT) and not budget.allows(ACT)
    feed_all(budget, [3, 4])
    assert budget.owed == 0 and budget.allows(OUT)
