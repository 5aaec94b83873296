"""Constrained decoding under sampling (issue 21, item 2): a tiny random model tilted toward
structure, temperature 1, seeded, through `hf_runtime`; bench/smi_constrain_bench.py's
experiment at a small size (the bench reports 500 turns)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers.smi_runtime import tiny_model

from .conftest import build_installed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import smi_constrain_bench as bench

#: sampled turns each way, per model family (measured on 2 cores, both ways: about 7 s for
#: GPT-2's 60 and 4 s for Mamba2's 40; the bench runs 500)
TURNS = {"gpt2": 60, "mamba2": 40}


@pytest.fixture
def one_thread() -> Iterator[None]:
    """A tiny model's ops are too small to split; two threads contending with any other
    process made a step several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("family", sorted(TURNS))
def test_no_malformed_act_with_the_constraint_and_some_without(family: str) -> None:
    installed = build_installed("bytelevel")
    model = tiny_model(family, vocab=len(installed.tokenizer))
    bench.tilt(model, installed.ids)
    turns = TURNS[family]
    on = bench.sampled_turns(model, installed.tokenizer, turns, constrain=True)
    off = bench.sampled_turns(model, installed.tokenizer, turns, constrain=False)
    assert on.turns == off.turns == turns
    # the constraint: ACTs happen, every one is well-formed, declared and schema-valid (all ran)
    assert on.acts >= turns // 4, on
    assert on.malformed == 0 and on.ran == on.acts and on.cut == 0, on
    # without it the same model's ACTs are refused (random text: an undeclared raw action)
    assert off.acts >= turns // 4 and off.malformed > off.acts // 2, off
