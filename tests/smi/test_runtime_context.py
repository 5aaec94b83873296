"""Long sessions on a KV model (a real tiny GPT-2 whose context holds 64 ids): a turn the
context can't hold is refused before anything is fed, with a sentence saying how much room
was left, and the session goes on; a turn that fills the context mid-generation is ended by
the runtime with room kept for its `<|eot|>`. Recurrent states have no bound."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.smi_runtime import first, run, runtime, tiny_model, toy

from smllm.smi.backends.hf import HFBackend
from smllm.smi.runtime import ContextFull
from smllm.smi.stream import Block, Transmission
from smllm.smi.tokens import Kind

POSITIONS = 64


def gpt2(**kw: Any) -> Any:
    return runtime(HFBackend(tiny_model("gpt2", vocab=toy().vocab, positions=POSITIONS)), **kw)


def usr(text: str) -> Transmission:
    return Transmission.of([Block.of("usr", text)])


def test_a_turn_the_context_cant_hold_is_refused_and_the_session_goes_on() -> None:
    rt = gpt2(max_new_tokens=6)
    session = rt.session()
    run(session.turn(usr("hi")))
    room = rt.backend.room(session.state)
    assert room == POSITIONS - session.state.seen > 2
    long = usr("word " * room)
    need = len(rt.compile(long, True))
    with pytest.raises(ContextFull) as refused:
        run(session.turn(long))
    assert str(refused.value) == (
        f"the model's context is full: this turn needs {need} ids for the transmission and 2 "
        f"for the shortest answer, and the session has room for {room} more; send a shorter "
        "transmission or start a new session"
    )
    assert refused.value.room == room
    # nothing was fed or applied: the session is as it was, and a shorter turn fits
    assert session.failed is None and session.turns == 1
    assert rt.backend.room(session.state) == room
    result = run(session.turn(usr("ok")))
    assert session.turns == 2 and result.fed_tokens <= room


def test_a_turn_that_fills_the_context_is_ended_by_the_runtime() -> None:
    rt = gpt2(max_new_tokens=500)
    session = rt.session()
    result = run(session.turn(usr("Tell me everything.")))
    assert session.state.seen == POSITIONS  # every position used, none past the end
    assert result.truncated and result.truncation is not None
    assert result.truncation.startswith("the model's context is full: ")
    assert result.generated[-1] == toy().ids[Kind.EOT]
    assert len(result.generated) == POSITIONS - result.prompt_tokens
    with pytest.raises(ContextFull, match="room for 0 more"):
        run(session.turn(usr("more?")))
    assert session.failed is None


def test_max_new_tokens_says_so_and_recurrent_states_have_no_bound() -> None:
    rt = runtime(HFBackend(tiny_model("mamba2", vocab=toy().vocab)), max_new_tokens=3)
    session = rt.session()
    result = run(session.turn(first()))
    assert rt.backend.room(session.state) is None
    assert result.truncation == (
        "max_new_tokens: 3 ids generated without <|eot|>; the runtime inserted it"
    )
    rwkv = HFBackend(tiny_model("rwkv", vocab=toy().vocab))
    assert rwkv.room(rwkv.new_state()) is None
    llama = HFBackend(tiny_model("llama", vocab=toy().vocab, positions=128))
    assert llama.room(llama.new_state()) == 128
