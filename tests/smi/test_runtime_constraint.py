"""The runtime's constraint hook (constrained decoding plugs in here): a turn's constraint is
made after the runtime transmission applied, masks after the budget, sees every sampled id,
and a backend that runs its own loop is replayed through a fresh one."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.smi_runtime import Engine, first, run, runtime, toy

from smllm.smi.backends.scripted import ScriptedBackend
from smllm.smi.runtime import Session, TurnConstraint
from smllm.smi.stream import SmiError
from smllm.smi.tokens import Kind


class Forbid:
    """A hand-written constraint: one id is never allowed."""

    def __init__(self, banned: int) -> None:
        self.banned = banned
        self.observed: list[int] = []

    def apply(self, logits: Any) -> Any:
        out = logits.clone()
        out[self.banned] = float("-inf")
        return out

    def observe(self, token_id: int) -> None:
        assert token_id != self.banned
        self.observed.append(token_id)

    def allows(self, token_id: int) -> bool:
        return token_id != self.banned


def wishes() -> Any:
    """A model that wants `<|out|>`, then the id of "x" (or, second best, "y"), then `<|eot|>`."""
    t = toy()
    x, y = t.enc("x")[0], t.enc("y")[0]

    def policy(history: Any, generated: int) -> Any:
        return [[t.ids[Kind.OUT]], [x, y], [t.ids[Kind.EOT]]][min(generated, 2)]

    return policy, x, y


def test_the_constraint_masks_after_the_budget_and_sees_every_id() -> None:
    t = toy()
    policy, x, y = wishes()
    out, eot = t.ids[Kind.OUT], t.ids[Kind.EOT]
    plain = run(runtime(ScriptedBackend(t.vocab, policy)).session().turn(first()))
    assert plain.generated == (out, x, eot)
    made: list[Forbid] = []
    seen: list[tuple[Any, Any]] = []

    def factory(session: Session) -> TurnConstraint:
        # called once the transmission applied: this turn's caps and reasoning
        seen.append(([tool.name for tool in session.caps.tools], session.reasoning.max_tokens))
        made.append(Forbid(x))
        return made[-1]

    rt = runtime(ScriptedBackend(t.vocab, policy), constraint=factory)
    result = run(rt.session().turn(first()))
    assert result.generated == (out, y, eot)
    assert result.model.blocks[0].text == "y"
    assert seen == [(["read_file"], 4)]
    assert made[0].observed == [out, y, eot]


def test_a_factory_may_decline_a_turn() -> None:
    t = toy()
    policy, x, _ = wishes()
    rt = runtime(ScriptedBackend(t.vocab, policy), constraint=lambda session: None)
    assert run(rt.session().turn(first())).generated[1] == x


def test_a_backend_that_runs_its_own_loop_gets_the_constraint_and_is_replayed() -> None:
    t = toy()
    policy, x, y = wishes()
    engine = Engine(t.vocab, policy)
    made: list[Forbid] = []

    def factory(session: Session) -> TurnConstraint:
        made.append(Forbid(x))
        return made[-1]

    result = run(runtime(engine, constraint=factory).session().turn(first()))
    assert result.generated[1] == y
    assert len(made) == 2  # the engine's, and a fresh one for the replay
    assert made[0].observed == made[1].observed == list(result.generated)
    engine.honest = False  # ignores what it is handed: the replay refuses the turn
    session = runtime(engine, constraint=factory).session()
    with pytest.raises(SmiError, match="grammar forbids"):
        run(session.turn(first()))
    assert session.failed is not None
