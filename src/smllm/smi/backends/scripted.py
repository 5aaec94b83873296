"""`ScriptedBackend`: a backend whose wishes are written down, for tests of the runtime.

Its logits make a chosen id the argmax at each step, so a test can make a "model" think
forever, emit a forbidden structural id, or call two tools, and check what the runtime lets
through. Each `new_state()` is independent: a session's script position lives in its state.

A script is either a sequence of ids — the k-th id the model generates in the session wants
to be `script[k]` (after the end: `then`) — or a callable `policy(history, generated)` given
every id fed so far and how many of them were the model's own, returning the wanted id or a
list of ids in order of preference. A feed of exactly one id counts as the model's own token:
the runtime feeds a runtime transmission (at least a block id and `<|eot|>`) in one call and
each generated id alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Policy", "ScriptedBackend", "ScriptedState"]

Policy = Callable[[Sequence[int], int], "int | Sequence[int]"]


@dataclass
class ScriptedState:
    history: list[int] = field(default_factory=list)
    generated: int = 0
    logits: Any = None


class ScriptedBackend:
    """Wanted ids get logits `strength`, `strength - 1`, … in order of preference; every other
    id 0. With greedy sampling the first wish always wins where it is allowed."""

    def __init__(
        self,
        vocab_size: int,
        script: Sequence[int] | Policy,
        *,
        then: int | None = None,
        strength: float = 10.0,
    ) -> None:
        self._vocab = vocab_size
        self.strength = strength
        if callable(script):
            self.policy: Policy = script
        else:
            wishes = [int(i) for i in script]

            def policy(history: Sequence[int], generated: int) -> int | Sequence[int]:
                if generated < len(wishes):
                    return wishes[generated]
                return [] if then is None else then

            self.policy = policy

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def new_state(self) -> ScriptedState:
        return ScriptedState()

    def feed(self, state: ScriptedState, ids: Sequence[int]) -> Any:
        import torch

        ids = [int(i) for i in ids]
        if not ids:
            if state.logits is None:
                raise ValueError("feed([]) on a state that has seen no ids has no logits")
            return state.logits
        if any(not 0 <= i < self._vocab for i in ids):
            raise ValueError(f"an id outside the vocabulary of {self._vocab}")
        state.history.extend(ids)
        if len(ids) == 1:
            state.generated += 1
        wish = self.policy(tuple(state.history), state.generated)
        wishes = [wish] if isinstance(wish, int) else list(wish)
        logits = torch.zeros(self._vocab, dtype=torch.float32)
        for rank, token_id in enumerate(wishes):
            logits[token_id] = self.strength - rank
        state.logits = logits
        return logits

    def snapshot(self, state: ScriptedState) -> ScriptedState:
        return copy.deepcopy(state)

    def restore(self, snapshot: ScriptedState) -> ScriptedState:
        return copy.deepcopy(snapshot)
