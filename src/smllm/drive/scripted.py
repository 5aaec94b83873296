"""The scripted model of `smllm run --backend scripted:FILE`: each turn it says the next
model transmission of FILE, spoken in the byte vocabulary. For tests, demos and CI runs of a
machine without a model; the runtime checks its ids like any backend's (budget, grammar)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..smi.budget import BudgetProcessor
from ..smi.compile import Compiler
from ..smi.convert import from_native
from ..smi.stream import SmiError, Transmission, check
from ..smi.tokens import Kind
from .bytevocab import BYTE_IDS, BYTE_VOCAB, ByteEncoder

__all__ = ["Script", "ScriptEnded", "ScriptHalted", "ScriptModel", "read_script"]


class ScriptEnded(Exception):
    """The script has no transmission for this turn."""


class ScriptHalted(Exception):
    """The run was interrupted while the scripted model was speaking."""


@dataclass(frozen=True)
class Script:
    transmissions: list[Transmission]
    pace: float = 0.0  # seconds per generated id: a model's speed, for demos and interrupts


def read_script(path: str) -> Script:
    """A script file: the native JSON form (`{"transmissions": [[block, …], …]}`, what `smllm
    smi parse --json` prints) of model transmissions only, one a turn; an optional `"pace"`
    gives seconds per generated id. ValueError (with the file's name) says what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON script: {exc}") from None
    pace = value.pop("pace", 0.0) if isinstance(value, dict) else 0.0
    if isinstance(pace, bool) or not isinstance(pace, int | float) or not 0 <= pace <= 10:
        raise ValueError(f"{path}: pace is a number of seconds per id, from 0 to 10")
    try:
        script = from_native(value)
        check(script, strict=False)
    except (ValueError, SmiError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    for n, transmission in enumerate(script, 1):
        if transmission.side not in ("model", None):
            raise ValueError(
                f"{path}: transmission {n} holds runtime blocks; a script holds only what the "
                "model says (think, out, act)"
            )
    return Script(script, float(pace))


@dataclass
class ScriptState:
    """One session's place in the script, and the ids it was fed."""

    turn: int = 0
    fed: list[int] = field(default_factory=list)


class ScriptModel:
    """A backend that generates whole turns (`runtime.types.GeneratesTurns`): turn N's ids are
    the script's Nth transmission compiled with the byte vocabulary, up to its `<|eot|>`."""

    def __init__(
        self, script: Sequence[Transmission], source: str = "the script", pace: float = 0.0
    ) -> None:
        compiler = Compiler(ByteEncoder(), BYTE_IDS, strict=False)
        eot = BYTE_IDS[Kind.EOT]
        self.turns: list[list[int]] = []
        for transmission in script:
            ids = compiler.compile([transmission]).ids if transmission.blocks else [eot]
            self.turns.append(ids[: ids.index(eot) + 1])
        self.source = source
        self.pace = pace
        #: set by an interrupt: a paced turn stops at its next id
        self.halt = threading.Event()

    @property
    def vocab_size(self) -> int:
        return BYTE_VOCAB

    def new_state(self) -> ScriptState:
        return ScriptState()

    def feed(self, state: ScriptState, ids: Sequence[int]) -> Any:
        state.fed.extend(int(i) for i in ids)
        return None

    def generate_turn(
        self,
        state: ScriptState,
        prompt: Sequence[int],
        budget: BudgetProcessor,
        sampler: Any,
        rng: Any,
        max_new_tokens: int,
        constraint: Any = None,
    ) -> list[int]:
        self.feed(state, prompt)
        if state.turn >= len(self.turns):
            raise ScriptEnded(
                f"{self.source} has {len(self.turns)} transmissions and the run asks for turn "
                f"{state.turn + 1}"
            )
        ids = self.turns[state.turn][:max_new_tokens]
        if self.pace:
            for _ in ids:
                if self.halt.wait(self.pace):
                    raise ScriptHalted("interrupted while the scripted model spoke")
        state.turn += 1
        self.feed(state, ids)
        return ids

    def snapshot(self, state: ScriptState) -> ScriptState:
        return ScriptState(state.turn, list(state.fed))

    def restore(self, snapshot: ScriptState) -> ScriptState:
        return self.snapshot(snapshot)
