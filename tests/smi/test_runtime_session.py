"""What a session carries for its caller: tenants told apart by the policy and the runner
(metadata), a sampler seed of its own (recorded), the runtime's default budget for a `fixed`
reasoning without `max_tokens`, and one ACT-answer path shared with `caps.answer_acts`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.smi_runtime import (
    act_ids,
    first,
    obs_payloads,
    read,
    run,
    runtime,
    think_payload,
    toy,
)

from smllm.smi.backends import Sampler
from smllm.smi.backends.scripted import ScriptedBackend
from smllm.smi.caps import Action, Capabilities, Ledger, Refusal, SessionInfo, answer_acts
from smllm.smi.runtime import DEFAULT_FIXED_THINK_TOKENS
from smllm.smi.stream import Block, Reasoning, Transmission
from smllm.smi.tokens import Kind


def may_read(action: Action, session: SessionInfo) -> Refusal | None:
    """A policy deciding on the tenant the caller attached to the session."""
    if "read" in session.metadata["permissions"]:
        return None
    return Refusal("policy_denied", f"tenant {session.metadata['tenant']} may not read files")


def test_two_tenants_call_the_same_tool_under_one_runtime() -> None:
    t = toy()
    ran: list[tuple[str, str, str | None]] = []

    async def runner(action: Action, session: SessionInfo) -> tuple[bool, Any]:
        ran.append((session.metadata["tenant"], session.id, action.id))
        return True, f"{action.arguments['path']} for {session.metadata['tenant']}"

    script = act_ids(t, read("a1", "notes.md"))
    rt = runtime(
        ScriptedBackend(t.vocab, script, then=t.ids[Kind.EOT]), actions=runner, caps_policy=may_read
    )
    acme_meta = {"tenant": "acme", "permissions": ["read"]}
    acme = rt.session(metadata=acme_meta)
    globex = rt.session(session_id="g-1", metadata={"tenant": "globex", "permissions": []})
    acme_meta["permissions"] = []  # the caller's dict changing later changes nothing
    assert obs_payloads(run(acme.turn(first()))) == [
        {"caused_by": "a1", "ok": True, "content": "notes.md for acme"}
    ]
    refused = run(globex.turn(first()))
    assert obs_payloads(refused) == [
        {
            "caused_by": "a1",
            "ok": False,
            "error": {"type": "policy_denied", "message": "tenant globex may not read files"},
        }
    ]
    assert refused.refusals[0] == Refusal("policy_denied", "tenant globex may not read files", "a1")
    assert ran == [("acme", acme.session_id, "a1")]  # the runner saw whom it ran for
    with pytest.raises(TypeError):
        acme.metadata["tenant"] = "globex"  # type: ignore[index]
    meta = {"tenant": "globex", "permissions": []}
    assert globex.info == SessionInfo("g-1", globex.caps, meta, globex.seed)


def uniform(t: Any) -> ScriptedBackend:
    """A model with no preference: every allowed id is equally likely under sampling."""
    return ScriptedBackend(t.vocab, lambda history, generated: [])


def sampled(session: Any) -> tuple[int, ...]:
    generated: tuple[int, ...] = run(session.turn(first(0))).generated
    return generated


def test_unseeded_sessions_draw_apart_and_a_recorded_seed_repeats() -> None:
    t = toy()
    rt = runtime(uniform(t), sampler=Sampler(temperature=1.0), max_new_tokens=24)
    one, two = rt.session(), rt.session()
    assert one.seed != two.seed
    draws = sampled(one)
    assert len(draws) == 25 and draws != sampled(two)
    # the seed read back reproduces the session's draws; a given seed is kept as given
    again = rt.session(seed=one.seed)
    assert again.seed == one.seed and sampled(again) == draws
    assert sampled(rt.session(seed=7)) == sampled(rt.session(seed=7))
    # a sampler's own seed is every unseeded session's (a reproducible run, asked for)
    fixed = runtime(uniform(t), sampler=Sampler(temperature=1.0, seed=3), max_new_tokens=24)
    a, b = fixed.session(), fixed.session()
    assert a.seed == b.seed == 3 and sampled(a) == sampled(b)


def think_forever(t: Any) -> ScriptedBackend:
    think = t.ids[Kind.THINK]
    return ScriptedBackend(t.vocab, lambda history, generated: [think, 40, t.ids[Kind.OUT]])


def test_fixed_reasoning_without_max_tokens_gets_the_runtimes_budget() -> None:
    t = toy()
    rt = runtime(think_forever(t), fixed_think_tokens=3, max_new_tokens=40)
    session = rt.session()
    result = run(session.turn(first(None)))
    assert session.reasoning == Reasoning("fixed", "low", 3)
    assert think_payload(result.generated, t.ids) == 3
    assert sum(len(e.text) for e in result.events if type(e).__name__ == "PayloadText") > 0
    # a CTRL's own max_tokens wins; the default is documented and used without the option
    ctrl = Block.of("ctrl", {"reasoning": {"mode": "fixed", "effort": "low", "max_tokens": 5}})
    run(session.turn(Transmission.of([ctrl, Block.of("usr", "go on")])))
    assert session.reasoning == Reasoning("fixed", "low", 5)
    default = runtime(think_forever(t)).session()
    run(default.turn(first(None)))
    assert default.reasoning == Reasoning("fixed", "low", DEFAULT_FIXED_THINK_TOKENS)
    assert DEFAULT_FIXED_THINK_TOKENS == 256


CALLS = [
    read("a1", "present.py"),
    read("a2", "missing.py"),
    read("a3", "crash.py"),
    read("a4", "typed.py"),
    {"id": "a5", "type": "tool", "name": "bash", "arguments": {}},  # undeclared
    {"id": "a6", "type": "tool", "name": "read_file", "arguments": {"path": 7}},  # schema
    read("a1", "again.py"),  # a reused id
    read("a7", "secret.env"),  # the policy's
]


def files(action: Action, session: SessionInfo) -> tuple[bool, Any]:
    path = action.arguments["path"]
    if path == "crash.py":
        raise OSError("disk on fire")
    if path == "missing.py":
        return False, "no such file"
    if path == "typed.py":
        return False, {"type": "not_found", "message": "gone"}
    return True, f"contents of {path}"


def no_secrets(action: Action, session: SessionInfo) -> Refusal | None:
    return Refusal("policy_denied", "no secrets") if "secret" in str(action.arguments) else None


def test_the_runtime_and_answer_acts_answer_alike() -> None:
    t = toy()
    rt = runtime(
        ScriptedBackend(t.vocab, act_ids(t, *CALLS), then=t.ids[Kind.EOT]),
        actions=files,
        caps_policy=no_secrets,
    )
    session = rt.session(session_id="s")
    result = run(session.turn(first()))
    assert result.obs is not None
    blocks = [b for b in result.model.blocks if b.kind is Kind.ACT]
    caps = Capabilities.from_payload(first().blocks[2].text)
    sequential = answer_acts(blocks, caps, Ledger(), files, no_secrets, SessionInfo("s", caps))
    assert sorted(b.text for b in result.obs.blocks) == sorted(b.text for b in sequential)
    by_id = {v["caused_by"]: v for v in (json.loads(b.text) for b in sequential)}
    assert by_id["a2"]["error"] == {"type": "action_error", "message": "no such file"}
    assert by_id["a3"]["error"] == {"type": "runtime_error", "message": "OSError: disk on fire"}
    assert by_id["a4"]["error"] == {"type": "not_found", "message": "gone"}
    assert by_id["a7"]["error"] == {"type": "policy_denied", "message": "no secrets"}
    assert {by_id[k]["error"]["type"] for k in ("a5", "a6", "raw-1")} == {
        "unknown_capability",
        "schema_violation",
        "duplicate_id",
    }
    assert len(sequential) == len(CALLS)


def test_a_runner_timeout_reads_the_same_in_both() -> None:
    from smllm.smi.caps import Admission, answer

    admitted = Admission("a1", None, None)
    assert json.loads(answer(admitted, TimeoutError("no result in 0.2 s")).text)["error"] == {
        "type": "timeout",
        "message": "no result in 0.2 s",
    }
    with pytest.raises(ValueError, match="admitted"):
        answer(admitted)
