"""The SMI stream as data (seed 003): blocks, transmissions, and the rules they must keep.

STREAM := TRANSMISSION* ; TRANSMISSION := BLOCK+ EOT ; BLOCK := TYPE PAYLOAD.

A payload is an ordered mix of text and runs of token ids of other modalities (image, audio,
action tokens): `Block.parts`. Every rule the seed states about a stream lives in `check`
(h11's habit: one place owns legality); the compiler, the parser and the runtime all call it.
Where the seed is silent, the choice is written beside the rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .tokens import MODEL_SIDE, Kind

__all__ = [
    "EFFORTS",
    "MODES",
    "Block",
    "Ctrl",
    "InjectionError",
    "Part",
    "Reasoning",
    "SmiError",
    "TokenRun",
    "Transmission",
    "canonical_json",
    "check",
    "parse_ctrl",
]

MODES = ("disabled", "fixed", "adaptive")
#: the seed's recommended efforts; it allows more, so any other non-empty string or a number
#: in [0, 1] (a continuous effort) is accepted too
EFFORTS = ("low", "medium", "high")


class SmiError(ValueError):
    """A stream that breaks a rule of the seed, with where: `transmission` and `block` are
    0-based indexes (None where the whole conversation or transmission is meant)."""

    def __init__(self, message: str, transmission: int | None = None, block: int | None = None):
        where = []
        if transmission is not None:
            where.append(f"transmission {transmission + 1}")
        if block is not None:
            where.append(f"block {block + 1}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.reason = message
        self.transmission = transmission
        self.block = block


class InjectionError(SmiError):
    """An encoding of untrusted text holds a forbidden (structural, special or markup) id."""


@dataclass(frozen=True)
class TokenRun:
    """Token ids of another modality inside a payload, passed through as they are. The
    compiler checks them against the structural and added ids all the same: a run can carry
    an image codec's ids, never an SMI token."""

    ids: tuple[int, ...]
    modality: str | None = None

    def __post_init__(self) -> None:
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.ids):
            raise ValueError("a token run holds non-negative integer ids")


Part = str | TokenRun


@dataclass(frozen=True)
class Block:
    """One block: its type and its payload's parts (text and token runs, in order)."""

    kind: Kind
    parts: tuple[Part, ...] = ()

    @classmethod
    def of(cls, kind: Kind | str, payload: str | Sequence[Part] | Any = "") -> Block:
        """A block from a type (a `Kind` or its tag) and a payload: text, parts, or a JSON
        value (rendered canonically: `canonical_json`)."""
        kind = kind if isinstance(kind, Kind) else Kind.from_tag(kind)
        if kind is Kind.EOT:
            raise ValueError("EOT ends a transmission; it is not a block")
        if isinstance(payload, str):
            parts: tuple[Part, ...] = (payload,) if payload else ()
        elif isinstance(payload, TokenRun):
            parts = (payload,)
        elif isinstance(payload, dict):
            parts = (canonical_json(payload),)
        elif isinstance(payload, Sequence) and all(isinstance(p, str | TokenRun) for p in payload):
            parts = tuple(p for p in payload if p != "")
        else:
            parts = (canonical_json(payload),)
        return cls(kind, parts)

    @property
    def text(self) -> str:
        """The payload's text parts joined (token runs left out)."""
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def is_text(self) -> bool:
        return all(isinstance(p, str) for p in self.parts)

    @property
    def side(self) -> str:
        return "model" if self.kind in MODEL_SIDE else "runtime"


@dataclass(frozen=True)
class Transmission:
    """One or more blocks, then EOT. `blocks` may be empty only for a model transmission
    read in lenient mode (a model that said `<|eot|>` at once)."""

    blocks: tuple[Block, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, blocks: Iterable[Block]) -> Transmission:
        return cls(tuple(blocks))

    @property
    def side(self) -> str | None:
        """ "runtime", "model", or None (empty, or mixed: `check` refuses both)."""
        sides = {b.side for b in self.blocks}
        return sides.pop() if len(sides) == 1 else None


def canonical_json(value: Any) -> str:
    """The one JSON form of a structured payload, for the compiler, the text form and the
    chat template alike: keys in the order given, no spaces, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# -- ctrl ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reasoning:
    mode: str = "adaptive"
    effort: str | float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Ctrl:
    """A CTRL payload: `reasoning` validated; every other key kept as given (`realtime`, …:
    the seed lets a runtime add its own)."""

    reasoning: Reasoning | None
    other: dict[str, Any]


def parse_ctrl(payload: str) -> Ctrl:
    """A CTRL block's payload, which must be a JSON object; ValueError says what's wrong."""
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise ValueError(f"a ctrl payload must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("a ctrl payload must be a JSON object")
    other = {k: v for k, v in value.items() if k != "reasoning"}
    if "reasoning" not in value:
        return Ctrl(None, other)
    return Ctrl(_reasoning(value["reasoning"]), other)


def _reasoning(value: object) -> Reasoning:
    if not isinstance(value, dict):
        raise ValueError("ctrl.reasoning must be an object")
    unknown = sorted(set(value) - {"mode", "effort", "max_tokens"})
    if unknown:
        raise ValueError(f"ctrl.reasoning has unknown keys: {', '.join(unknown)}")
    mode = value.get("mode", "adaptive")
    if mode not in MODES:
        raise ValueError(f"ctrl.reasoning.mode must be one of {', '.join(MODES)}, not {mode!r}")
    effort = value.get("effort")
    if effort is not None:
        if isinstance(effort, bool) or not isinstance(effort, str | int | float):
            raise ValueError("ctrl.reasoning.effort must be a string or a number in [0, 1]")
        if isinstance(effort, str) and not effort.strip():
            raise ValueError("ctrl.reasoning.effort must not be empty")
        if not isinstance(effort, str) and not 0 <= effort <= 1:
            raise ValueError("a numeric ctrl.reasoning.effort must be in [0, 1]")
    max_tokens = value.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0
    ):
        raise ValueError("ctrl.reasoning.max_tokens must be a non-negative integer")
    if mode == "disabled" and max_tokens not in (None, 0):
        raise ValueError("ctrl.reasoning: mode disabled allows no reasoning tokens")
    return Reasoning(mode, effort, max_tokens)


# -- the rules -------------------------------------------------------------------------------


def check(transmissions: Sequence[Transmission], *, strict: bool = True) -> Reasoning | None:
    """Every rule of the seed over a whole conversation; raises SmiError at the first broken
    one. Returns the reasoning in force at the end (the last CTRL's, None if none).

    - A transmission has one or more blocks (an empty model one passes in lenient mode), all
      of one side: the runtime's (ctrl, sys, dev, caps, usr, obs) or the model's (think, out,
      act). Several transmissions in a row from one side are valid.
    - Strict mode: inside a runtime transmission, blocks keep the seed's order (ctrl, sys,
      dev, caps, usr, obs; several of one type in a row are fine), so a lower-authority block
      never precedes a higher one in the same message. A new transmission may bring any of
      them again (a changed budget, new capabilities, a policy update).
    - CTRL and CAPS payloads are JSON objects; `ctrl.reasoning` is validated (`parse_ctrl`).
    - A THINK block while reasoning is `disabled` is an error; so is a THINK longer than
      `max_tokens` where that is checked (the runtime counts tokens; this counts nothing).
    - OBS and ACT pairing (every ACT answered once) is the runtime's ledger, not this check.
    """
    reasoning: Reasoning | None = None
    for t, transmission in enumerate(transmissions):
        if not transmission.blocks:
            if strict:
                raise SmiError("an empty transmission (EOT with no block before it)", t)
            continue
        side = transmission.side
        if side is None:
            raise SmiError("runtime and model blocks mixed in one transmission", t)
        last = -1
        for b, block in enumerate(transmission.blocks):
            if block.kind is Kind.EOT:
                raise SmiError("EOT is not a block", t, b)
            if side == "runtime" and strict and int(block.kind) < last:
                raise SmiError(
                    f"a {block.kind.tag} block after a {Kind(last).tag} block: a runtime "
                    "transmission keeps the order ctrl, sys, dev, caps, usr, obs",
                    t,
                    b,
                )
            last = max(last, int(block.kind))
            if block.kind in (Kind.CTRL, Kind.CAPS) and not block.is_text:
                raise SmiError(f"a {block.kind.tag} payload is JSON text, not tokens", t, b)
            if block.kind is Kind.CTRL:
                try:
                    ctrl = parse_ctrl(block.text)
                except ValueError as exc:
                    raise SmiError(str(exc), t, b) from None
                if ctrl.reasoning is not None:
                    reasoning = ctrl.reasoning
            elif block.kind is Kind.CAPS:
                try:
                    value = json.loads(block.text)
                except ValueError:
                    value = None
                if not isinstance(value, dict):
                    raise SmiError("a caps payload must be a JSON object", t, b)
            elif block.kind is Kind.THINK and reasoning and reasoning.mode == "disabled":
                raise SmiError("a think block while ctrl.reasoning.mode is disabled", t, b)
    return reasoning
