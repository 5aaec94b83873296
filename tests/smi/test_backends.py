"""Backends: each family's state carried across feeds equals one pass over the whole sequence
(multi-id feeds included; Mamba-1 through one-id feeding), states are independent, snapshots
restore exactly; the scripted backend and the sampler behave as documented.

Tiny random-initialised models (hidden 32, 2 layers) on CPU. torch runs on one thread here:
with two threads on a busy 2-core machine, OpenMP's spinning made a Mamba decode step 30x slower
(82 ms vs 2.6 ms measured), and these models gain nothing from a second thread.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

try:
    import torch
    import transformers
except ImportError as exc:  # no skips: say how to get them
    raise ImportError(
        f"the SMI backend tests need torch and transformers ({exc}): "
        "pip install 'torch==2.13.0' 'transformers==5.24.0'"
    ) from exc

from helpers.smi_runtime import IDS, VOCAB, shared_model

from smllm.smi.backends import GREEDY, Backend, Sampler
from smllm.smi.backends.hf import HFBackend
from smllm.smi.backends.scripted import ScriptedBackend

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()

FAMILIES = ("mamba", "mamba2", "rwkv", "gpt2", "llama")


def full_logits(model: Any, ids: list[int]) -> Any:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def random_ids(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n,), generator=g).tolist()


#: feed sizes: multi-id feeds onto a non-empty state, single ids between them
CHUNKS = (9, 1, 5, 1, 1, 12, 3, 1, 7)


@pytest.mark.parametrize("family", FAMILIES)
def test_carried_state_equals_one_pass_over_the_whole_sequence(family: str) -> None:
    model = shared_model(family)
    backend = HFBackend(model)
    assert isinstance(backend, Backend)
    ids = random_ids(sum(CHUNKS), seed=1)
    reference = full_logits(model, ids)
    state = backend.new_state()
    at = 0
    for size in CHUNKS:
        logits = backend.feed(state, ids[at : at + size])
        at += size
        assert logits.shape == (backend.vocab_size,)
        torch.testing.assert_close(logits, reference[at - 1], atol=2e-4, rtol=1e-4)
    assert state.seen == len(ids)


def test_mamba1_multi_id_feeds_onto_a_cache_are_wrong_without_one_id_feeding() -> None:
    """Why HFBackend feeds Mamba-1 one id at a time: the fallback scan restarts from zero."""
    model = shared_model("mamba")
    ids = random_ids(sum(CHUNKS), seed=1)
    reference = full_logits(model, ids)
    for one_token, wrong in ((None, False), (False, True)):
        backend = HFBackend(model, one_token_at_a_time=one_token)
        state = backend.new_state()
        backend.feed(state, ids[:10])
        logits = backend.feed(state, ids[10:])
        off = float((logits - reference[-1]).abs().max())
        assert (off > 1e-4) is wrong, off


@pytest.mark.parametrize("family", FAMILIES)
def test_states_are_independent_when_interleaved(family: str) -> None:
    model = shared_model(family)
    backend = HFBackend(model)
    a_ids, b_ids = random_ids(24, seed=2), random_ids(24, seed=3)

    def alone(ids: list[int]) -> list[Any]:
        state = backend.new_state()
        return [backend.feed(state, ids[i : i + 4]).clone() for i in range(0, len(ids), 4)]

    b_alone = alone(b_ids)
    a_state, b_state = backend.new_state(), backend.new_state()
    b_mixed = []
    for i in range(0, 24, 4):
        backend.feed(a_state, a_ids[i : i + 4])
        b_mixed.append(backend.feed(b_state, b_ids[i : i + 4]).clone())
    for x, y in zip(b_alone, b_mixed, strict=True):
        assert torch.equal(x, y)
    # a new state after both ran starts fresh: nothing of A or B is in it
    assert torch.equal(alone(b_ids)[-1], b_alone[-1])
    assert a_state.memory is not b_state.memory


@pytest.mark.parametrize("family", ["mamba", "rwkv", "gpt2"])
def test_snapshot_restores_exactly_and_stays_reusable(family: str) -> None:
    backend = HFBackend(shared_model(family))
    ids = random_ids(30, seed=4)
    state = backend.new_state()
    backend.feed(state, ids[:20])
    snap = backend.snapshot(state)
    first = backend.feed(state, ids[20:]).clone()
    for _ in range(2):
        restored = backend.restore(snap)
        assert torch.equal(backend.feed(restored, ids[20:]), first)
    assert snap.seen == 20


def test_feed_nothing_returns_the_last_logits_and_needs_a_fed_state() -> None:
    backend = HFBackend(shared_model("gpt2"))
    state = backend.new_state()
    with pytest.raises(ValueError, match="no logits"):
        backend.feed(state, [])
    logits = backend.feed(state, [1, 2, 3])
    assert backend.feed(state, []) is logits
    assert backend.vocab_size == VOCAB


def test_scripted_backend_wants_its_script_per_session() -> None:
    script = [IDS[6], 5, 6, IDS[9]]
    backend = ScriptedBackend(VOCAB, script, then=IDS[9])
    one, two = backend.new_state(), backend.new_state()
    prompt = [IDS[4], 3, IDS[9]]
    got = []
    logits = backend.feed(one, prompt)
    for _ in range(5):
        token = GREEDY.pick(logits)
        got.append(token)
        logits = backend.feed(one, [token])
    assert got == [*script, IDS[9]]
    # another state starts at the script's beginning, whatever the first one did
    assert GREEDY.pick(backend.feed(two, prompt)) == script[0]
    # preferences in order: the second wish wins where the first is masked
    ranked = ScriptedBackend(VOCAB, lambda history, generated: [7, 8])
    logits = ranked.feed(ranked.new_state(), [1, 2])
    assert GREEDY.pick(logits) == 7
    assert GREEDY.pick(logits.masked_fill(torch.arange(VOCAB) == 7, float("-inf"))) == 8


def test_sampler_never_picks_a_forbidden_id_and_is_reproducible() -> None:
    logits = torch.zeros(VOCAB)
    forbidden = torch.arange(VOCAB) % 3 == 0
    masked = logits.masked_fill(forbidden, float("-inf"))
    sampler = Sampler(temperature=1.5, seed=7)
    rng = sampler.rng()
    picks = [sampler.pick(masked, rng) for _ in range(300)]
    assert all(p % 3 != 0 for p in picks)
    assert len(set(picks)) > 20  # it really samples
    rng2 = sampler.rng()
    assert [sampler.pick(masked, rng2) for _ in range(300)] == picks
    top2 = Sampler(temperature=1.0, top_k=2)
    ranked = torch.arange(VOCAB, dtype=torch.float32)
    rng3 = top2.rng()
    assert {top2.pick(ranked, rng3) for _ in range(50)} == {VOCAB - 1, VOCAB - 2}
    assert GREEDY.pick(torch.tensor([0.0, 3.0, 3.0])) == 1
    with pytest.raises(ValueError, match="forbidden"):
        GREEDY.pick(torch.full((4,), float("-inf")))
