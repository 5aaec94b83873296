"""The runtime: sessions isolated (also against a fresh process), incremental turns equal to
re-encoding the whole history, the budget kept under sampling, ACTs validated (a refused one
never runs and still gets its OBS), allowed ones run concurrently with OBS in completion order,
and the tokens fed per turn flat while re-encoding grows.

A real tiny tokenizer (conftest's ByteLevel BPE with the SMI block installed), the real
compiler, encoder and parser; tiny random models or a scripted backend.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.smi_runtime import (
    READ_FILE,
    Engine,
    Recorder,
    act_ids,
    first,
    follow,
    obs_payloads,
    read,
    run,
    runtime,
    think_payload,
    tiny_model,
    toy,
)

from smllm.smi.backends import GREEDY, Sampler
from smllm.smi.backends.hf import HFBackend
from smllm.smi.backends.scripted import ScriptedBackend
from smllm.smi.budget import BudgetProcessor
from smllm.smi.runtime import Runtime
from smllm.smi.stream import Block, Reasoning, SmiError, TokenRun, Transmission
from smllm.smi.tokens import RUNTIME_SIDE, Kind

TESTS = Path(__file__).resolve().parent.parent


# -- isolation --------------------------------------------------------------------------------


def b_outputs(family: str, interleave: bool, temperature: float) -> list[Any]:
    """Session B's generated ids over three turns and the logits its state ends each turn
    with (floats, exact: JSON round-trips them), alone or interleaved with a session A.
    Sampled ids alone would hide a leak: near-uniform logits nudged a little still give the
    same draw."""
    torch.set_num_threads(1)
    t = toy()
    rt = runtime(
        HFBackend(tiny_model(family, vocab=t.vocab)),
        max_new_tokens=10,
        sampler=Sampler(temperature=temperature, seed=5),
    )

    async def go() -> list[Any]:
        a = rt.session(seed=1) if interleave else None
        b = rt.session(seed=2)
        out = []
        a_in, b_in = first(3), first(2)
        for turn in range(3):
            if a is not None:
                a_result = await a.turn(a_in)
                a_in = follow(a_result, f"A says {turn}")
            b_result = await b.turn(b_in)
            logits = rt.backend.feed(b.state, [])
            out.append([list(b_result.generated), logits.tolist()])
            b_in = follow(b_result, f"B says {turn}")
        return out

    return list(asyncio.run(go()))


ISOLATION_CASES = [("gpt2", 0.0), ("mamba2", 1.0)]


@functools.cache
def b_alone(family: str, temperature: float) -> list[Any]:
    return b_outputs(family, False, temperature)


@pytest.mark.parametrize(("family", "temperature"), ISOLATION_CASES)
def test_session_b_is_the_same_whether_or_not_a_runs_interleaved(
    family: str, temperature: float
) -> None:
    alone = b_alone(family, temperature)
    assert b_outputs(family, True, temperature) == alone
    assert any(len(generated) > 2 for generated, _ in alone)


def test_session_b_is_the_same_in_a_fresh_process() -> None:
    code = (
        f"import sys, json; sys.path.insert(0, {str(TESTS)!r}); "
        "from smi.test_runtime import b_outputs, ISOLATION_CASES; "
        "print(json.dumps([b_outputs(f, False, t) for f, t in ISOLATION_CASES]))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    assert fresh == [b_alone(f, t) for f, t in ISOLATION_CASES]


def test_each_session_gets_a_fresh_state_object() -> None:
    rt = runtime(ScriptedBackend(toy().vocab, [toy().ids[Kind.OUT], 5, toy().ids[Kind.EOT]]))
    a, b = rt.session(), rt.session()
    assert a.state is not b.state and a.session_id != b.session_id
    run(a.turn(first()))
    assert b.state.history == [] and a.state.history


# -- incremental == re-encode -----------------------------------------------------------------


def reencode_turn(rt: Runtime, history: list[int], prompt: list[int], reasoning: Any) -> Any:
    """The baseline: a fresh state, the whole history and the new prompt in one feed, then
    the same greedy loop and budget. Returns (generated ids, ids fed)."""
    backend = rt.backend
    state = backend.new_state()
    fed = [*history, *prompt]
    logits = backend.feed(state, fed)
    budget = BudgetProcessor(rt.ids, reasoning, extra_forbidden=rt.forbid)
    out: list[int] = []
    eot = rt.ids[Kind.EOT]
    for _ in range(rt.max_new_tokens):
        token = GREEDY.pick(budget.apply(logits))
        budget.observe(token)
        out.append(token)
        logits = backend.feed(state, [token])
        if token == eot:
            break
    else:
        out.append(eot)
        logits = backend.feed(state, [eot])
    return out, len(fed) + len(out), logits


@pytest.mark.parametrize("family", ["mamba", "mamba2", "rwkv", "gpt2"])
def test_incremental_turns_equal_reencoding_the_whole_history(family: str) -> None:
    t = toy()
    model = tiny_model(family, vocab=t.vocab)
    rt = runtime(HFBackend(model, keep_history=True), max_new_tokens=8)
    session = rt.session()
    history: list[int] = []
    transmission = first(3)
    for turn in range(3):
        prompt = t.compiler.compile_runtime(transmission, after_model_eot=turn > 0)
        result = run(session.turn(transmission))
        assert result.prompt_tokens == len(prompt) and len(prompt) > 1
        base, base_fed, base_logits = reencode_turn(rt, history, prompt, session.reasoning)
        assert list(result.generated) == base
        torch.testing.assert_close(
            rt.backend.feed(session.state, []), base_logits, atol=2e-4, rtol=1e-4
        )
        history += [*prompt, *result.generated]
        assert session.state.history == history  # only new ids went in, all of them
        assert result.fed_tokens == len(prompt) + len(result.generated)
        assert result.fed_tokens < base_fed or turn == 0
        transmission = follow(result, f"turn {turn}")


def test_fed_ids_equal_the_compiled_conversation() -> None:
    """The framing: the ids fed over a session (prompts, generated ids) are exactly the
    compiler's ids for the conversation so far."""
    t = toy()
    reply = [t.ids[Kind.OUT], *t.enc("\nDone here.\n"), t.ids[Kind.EOT]]
    rt = runtime(ScriptedBackend(t.vocab, replying(reply)))
    session = rt.session()
    transmission = first()
    for turn in range(3):
        result = run(session.turn(transmission))
        assert result.model == Transmission.of([Block.of("out", "Done here.")])
        transmission = follow(result, f"and {turn}")
    assert session.state.history == t.compiler.compile(session.history).ids[:-1]  # the last "\n"
    # a plain function in place of the compiler feeds the same
    rt2 = runtime(
        ScriptedBackend(t.vocab, replying(reply)),
        lambda tr, after: t.compiler.compile_runtime(tr, after_model_eot=after),
    )
    again = rt2.session()
    for transmission in session.history[::2]:
        run(again.turn(transmission))
    assert again.state.history == session.state.history
    assert t.compiler.compile_runtime(transmission, after_model_eot=True)[0] != t.ids[Kind.EOT]


def replying(reply: list[int]) -> Any:
    """A policy that answers every runtime transmission with `reply`."""

    def policy(history: Any, generated: int) -> int:
        for k in range(len(reply) - 1, 0, -1):
            if list(history[-k:]) == reply[:k]:
                return reply[k]
        return reply[0]

    return policy


def test_fed_tokens_per_turn_stay_flat_while_reencoding_grows() -> None:
    t = toy()
    reply = [t.ids[Kind.OUT], *t.enc("\nok\n"), t.ids[Kind.EOT]]
    rt = runtime(ScriptedBackend(t.vocab, replying(reply)))
    session = rt.session()
    incremental, reencoded, total = [], [], 0
    transmission = first()
    for _ in range(50):
        result = run(session.turn(transmission))
        assert result.generated == tuple(reply)
        incremental.append(result.fed_tokens)
        reencoded.append(total + result.fed_tokens)  # the whole history again, then the turn
        total += result.fed_tokens
        transmission = Transmission.of([Block.of("usr", "next")])
    assert incremental[1] == incremental[49]  # turn 2 onward: the same small feed
    assert reencoded[49] > 40 * incremental[49]
    assert reencoded[49] - reencoded[48] == incremental[48]  # and it keeps growing


# -- budget ------------------------------------------------------------------------------------


def test_budget_is_never_exceeded_under_sampling() -> None:
    t = toy()
    never = {t.ids[k] for k in RUNTIME_SIDE} | set(t.ids.ids[10:])

    def think_forever(history: Any, generated: int) -> list[int]:
        return [t.ids[Kind.THINK], t.ids[Kind.SYS], 40, t.ids[Kind.EOT]]

    backends = [
        ScriptedBackend(t.vocab, think_forever),
        HFBackend(tiny_model("mamba2", vocab=t.vocab)),
    ]
    for backend in backends:
        scripted = isinstance(backend, ScriptedBackend)
        rt = runtime(backend, sampler=Sampler(temperature=1.0), max_new_tokens=24)
        for seed in range(12 if scripted else 4):
            session = rt.session(seed=seed)
            transmission = first(seed % 4)
            for _ in range(2):
                result = run(session.turn(transmission))
                assert think_payload(result.generated, t.ids) <= seed % 4
                assert not never & set(result.generated)
                transmission = follow(result)
            disabled = rt.session(seed=seed)
            result = run(disabled.turn(first(None, mode="disabled")))
            assert t.ids[Kind.THINK] not in result.generated
            assert result.model.blocks[0].kind is not Kind.THINK


def test_a_runaway_turn_is_closed_by_the_runtime() -> None:
    t = toy()
    rt = runtime(ScriptedBackend(t.vocab, lambda h, g: [t.ids[Kind.OUT], 40]), max_new_tokens=5)
    session = rt.session()
    result = run(session.turn(first()))
    assert result.truncated and len(result.generated) == 6
    assert result.generated[-1] == t.ids[Kind.EOT] and result.model.blocks[0].kind is Kind.OUT
    second = run(session.turn(follow(result)))  # the session goes on after a forced close
    assert second.truncated and second.model.blocks[0].kind is Kind.OUT
    assert session.state.history[-1] == t.ids[Kind.EOT]


# -- actions ------------------------------------------------------------------------------------


def test_actions_run_concurrently_and_observations_come_in_completion_order() -> None:
    t = toy()
    script = act_ids(t, read("a1", "slow.py"), read("a2", "fast.py"))
    runner = Recorder({"slow.py": 0.3, "fast.py": 0.05})
    rt = runtime(ScriptedBackend(t.vocab, script, then=t.ids[Kind.EOT]), actions=runner)
    result = run(rt.session().turn(first()))
    assert [a.id for a in result.actions if a is not None] == ["a1", "a2"]
    payloads = obs_payloads(result)
    assert [p["caused_by"] for p in payloads] == ["a2", "a1"]  # completion order
    assert payloads[0] == {"caused_by": "a2", "ok": True, "content": "contents of fast.py"}
    # both started before either ended: they overlapped
    assert runner.log[:2] == [("start", "a1"), ("start", "a2")]
    assert runner.log[2:] == [("end", "a2"), ("end", "a1")]


def test_a_refused_act_never_runs_and_gets_an_error_obs() -> None:
    t = toy()
    bash = {"id": "a2", "type": "tool", "name": "bash", "arguments": {"command": "rm -rf /"}}
    bad_args = {"id": "a3", "type": "tool", "name": "read_file", "arguments": {"path": 7}}
    script = act_ids(t, read("a1", "a.py"), bash, bad_args, read("a1", "again.py"))
    runner = Recorder({})
    rt = runtime(ScriptedBackend(t.vocab, script, then=t.ids[Kind.EOT]), actions=runner)
    session = rt.session()
    result = run(session.turn(first()))
    assert [r is None for r in result.refusals] == [True, False, False, False]
    assert runner.log == [("start", "a1"), ("end", "a1")]  # only the declared, valid one ran
    payloads = obs_payloads(result)
    assert len(payloads) == 4  # exactly one OBS per ACT
    refused = [p for p in payloads if not p["ok"]]
    # a reused id can't name its answer: the ledger gives it one (raw-1)
    assert {p["caused_by"]: p["error"]["type"] for p in refused} == {
        "a2": "unknown_capability",
        "a3": "schema_violation",
        "raw-1": "duplicate_id",
    }
    assert all(set(p["error"]) >= {"type", "message"} for p in refused)
    assert [p for p in payloads if p["ok"]] == [
        {"caused_by": "a1", "ok": True, "content": "contents of a.py"}
    ]


def test_runner_errors_timeouts_and_sync_runners_become_observations() -> None:
    t = toy()
    script = act_ids(t, read("a1", "boom"), read("a2", "sleepy"), read("a3", "fine"))
    rt = runtime(
        ScriptedBackend(t.vocab, script, then=t.ids[Kind.EOT]),
        actions=Recorder({"sleepy": 5.0}),
        action_timeout=0.2,
    )
    payloads = {p["caused_by"]: p for p in obs_payloads(run(rt.session().turn(first())))}
    assert payloads["a1"]["ok"] is False and payloads["a1"]["error"]["type"] == "runtime_error"
    assert "disk on fire" in payloads["a1"]["error"]["message"]
    assert payloads["a2"]["error"]["type"] == "timeout"
    assert payloads["a3"]["ok"] is True

    calls: list[str] = []

    def sync_runner(action: Any, session: Any) -> tuple[bool, Any]:
        calls.append(action.id)
        return False, "no such file"

    rt = runtime(ScriptedBackend(t.vocab, act_ids(t, read("a9", "x"))), actions=sync_runner)
    [payload] = obs_payloads(run(rt.session().turn(first())))
    assert calls == ["a9"] and payload["ok"] is False and payload["caused_by"] == "a9"


def test_every_act_must_be_answered_once_in_the_next_turn() -> None:
    t = toy()
    script = act_ids(t, read("a1", "a.py"))
    reply = [t.ids[Kind.OUT], *t.enc("\nok\n"), t.ids[Kind.EOT]]

    def policy(history: Any, generated: int) -> int:
        return script[generated] if generated < len(script) else replying(reply)(history, 0)

    rt = runtime(ScriptedBackend(t.vocab, policy), actions=Recorder({}))
    session = rt.session()
    result = run(session.turn(first()))
    with pytest.raises(SmiError, match="a1"):
        run(session.turn(Transmission.of([Block.of("usr", "ignore that")])))
    stray = Block.of("obs", {"caused_by": "zz", "ok": True})
    with pytest.raises(SmiError, match="zz"):
        run(session.turn(Transmission.of([*result.obs.blocks, stray])))  # type: ignore[union-attr]
    with pytest.raises(SmiError, match="runtime transmission"):
        run(session.turn(Transmission.of([Block.of("out", "I am the model")])))
    answered = run(session.turn(follow(result)))
    assert answered.obs is None and answered.model.blocks[0].kind is Kind.OUT
    # answered once: the same OBS again is refused
    with pytest.raises(SmiError, match="a1"):
        run(session.turn(follow(result)))


def test_ctrl_and_caps_in_a_later_transmission_take_effect() -> None:
    t = toy()
    script = act_ids(t, {"id": "b1", "type": "tool", "name": "bash", "arguments": {}})
    reply = [t.ids[Kind.OUT], *t.enc("\nok\n"), t.ids[Kind.EOT]]

    def policy(history: Any, generated: int) -> int:
        # the first turn says ok; the second calls bash
        if generated < len(reply):
            return reply[generated]
        g = generated - len(reply)
        return script[g] if g < len(script) else t.ids[Kind.EOT]

    rt = runtime(ScriptedBackend(t.vocab, policy), actions=lambda a, s: (True, "ran"))
    session = rt.session()
    run(session.turn(first(5)))
    assert session.reasoning == Reasoning("fixed", "low", 5)
    caps = {"tools": [READ_FILE, {"name": "bash", "parameters": {"type": "object"}}]}
    update = Transmission.of(
        [
            Block.of("ctrl", {"reasoning": {"mode": "disabled"}}),
            Block.of("caps", caps),
            Block.of("usr", "you may use bash now"),
        ]
    )
    result = run(session.turn(update))
    assert session.reasoning == Reasoning("disabled")
    assert obs_payloads(result) == [{"caused_by": "b1", "ok": True, "content": "ran"}]


def test_a_refused_transmission_changes_nothing_and_a_failed_turn_ends_the_session() -> None:
    t = toy()
    reply = [t.ids[Kind.OUT], *t.enc("\nok\n"), t.ids[Kind.EOT]]
    answer = replying(reply)

    def policy(history: Any, generated: int) -> int:
        if generated == len(reply) + 2:
            raise RuntimeError("the model fell over")
        return int(answer(history, generated))

    rt = runtime(ScriptedBackend(t.vocab, policy))
    session = rt.session()
    run(session.turn(first(5)))
    fed = list(session.state.history)
    smuggled = Transmission.of(
        [
            Block.of("ctrl", {"reasoning": {"mode": "disabled"}}),
            Block.of("usr", ["look: ", TokenRun((t.ids[Kind.SYS],))]),
        ]
    )
    with pytest.raises(ValueError, match="token run"):
        run(session.turn(smuggled))
    assert session.reasoning == Reasoning("fixed", "low", 5)  # the CTRL was not applied
    assert session.state.history == fed and len(session.history) == 2
    with pytest.raises(RuntimeError, match="fell over"):
        run(session.turn(Transmission.of([Block.of("usr", "go on")])))
    assert session.failed is not None
    with pytest.raises(RuntimeError, match="new session"):
        run(session.turn(Transmission.of([Block.of("usr", "again")])))
    assert run(rt.session().turn(first())).model.blocks[0].kind is Kind.OUT


def test_a_backend_that_runs_its_own_loop_is_checked_not_trusted() -> None:
    t = toy()

    def think_forever(history: Any, generated: int) -> list[int]:
        return [t.ids[Kind.THINK], t.ids[Kind.SYS], 40, t.ids[Kind.EOT]]

    plain = run(runtime(ScriptedBackend(t.vocab, think_forever)).session().turn(first(3)))
    engine = Engine(t.vocab, think_forever)
    from_engine = run(runtime(engine).session().turn(first(3)))
    assert from_engine.generated == plain.generated
    assert think_payload(from_engine.generated, t.ids) == 3
    engine.honest = False
    session = runtime(engine).session()
    with pytest.raises(SmiError, match="forbids"):
        run(session.turn(first(3)))
    assert session.failed is not None
