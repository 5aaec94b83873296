"""The stream's structure as a small state machine over structural ids, apart from the text of
payloads (`stream_parser.py` decodes those).

A `Phase` says where a stream is: between transmissions, or inside a runtime, model or THINK
block. Each structural id leads to one phase (`NEXT`); `Grammar.admit` refuses the ids that
can't come from here (the other side's, in a one-sided stream or an open transmission),
`enter` opens the block (a THINK while reasoning is disabled is refused), THINK ids are counted
against `max_tokens` as the budget counts them, and `end` applies the whole transmission's
rules (`stream.check`: block order, CTRL and CAPS payloads) at its `<|eot|>`, taking the
reasoning its CTRL sets.
"""

from __future__ import annotations

import enum
from typing import Literal

from ..stream import Reasoning, SmiError, Transmission, check
from ..tokens import MODEL_SIDE, Kind

__all__ = ["NEXT", "Grammar", "Phase", "Refused", "Side"]

Side = Literal["model", "runtime", "any"]


class Phase(enum.Enum):
    """Where a stream is, as far as structure goes."""

    BETWEEN = "between"  # no transmission open: the start, or right after <|eot|>
    RUNTIME = "runtime"  # a runtime block open (ctrl, sys, dev, caps, usr, obs)
    MODEL = "model"  # an out or act block open
    THINK = "think"  # a think block open: its ids count against max_tokens


#: the phase each structural id leads to
NEXT: dict[Kind, Phase] = {
    kind: Phase.BETWEEN
    if kind is Kind.EOT
    else Phase.THINK
    if kind is Kind.THINK
    else Phase.MODEL
    if kind in MODEL_SIDE
    else Phase.RUNTIME
    for kind in Kind
}
#: the side of the transmission each phase is inside (None: none is open)
_SIDE_OF: dict[Phase, str | None] = {
    Phase.BETWEEN: None,
    Phase.RUNTIME: "runtime",
    Phase.MODEL: "model",
    Phase.THINK: "model",
}


class Refused(Exception):
    """A rule broke: a strict parser raises it as `ParseError`, a lenient one records a
    `Violation`. `block` is the 0-based index of the block at fault when it isn't the open
    one."""

    def __init__(self, message: str, block: int | None = None) -> None:
        super().__init__(message)
        self.block = block


class Grammar:
    """One stream's structure: its `phase`, the `reasoning` in force (a CTRL block's, from
    the `<|eot|>` of its transmission on) and the THINK ids of the open transmission. `side`
    is whose stream it is ("model", "runtime", or "any": each transmission of one side)."""

    __slots__ = ("phase", "reasoning", "side", "think_ids")

    def __init__(self, side: Side, reasoning: Reasoning | None) -> None:
        if side not in ("model", "runtime", "any"):
            raise ValueError(f"side must be 'model', 'runtime' or 'any', not {side!r}")
        self.side: Side = side
        self.reasoning = reasoning
        self.phase = Phase.BETWEEN
        self.think_ids = 0  # payload ids in THINK blocks of the open transmission

    def admit(self, kind: Kind) -> Phase:
        """The phase the structural id `kind` leads to from here. Refused, and nothing
        changes, for a block of the side this stream or the open transmission isn't."""
        target = NEXT[kind]
        side = _SIDE_OF[target]
        if side is not None:
            if self.side != "any" and side != self.side:
                raise Refused(f"a {side}-side {kind.text} in a {self.side} stream")
            current = _SIDE_OF[self.phase]
            if current is not None and side != current:
                raise Refused(f"a {side}-side {kind.text} in a {current} transmission")
        return target

    def enter(self, kind: Kind) -> None:
        """Open a block of `kind` (the one before is closed). A THINK while reasoning is
        disabled is Refused, the block open all the same (a lenient parser reads it)."""
        self.phase = NEXT[kind]
        if kind is Kind.THINK and self.reasoning is not None and self.reasoning.mode == "disabled":
            raise Refused("a <|think|> block while ctrl.reasoning.mode is disabled")

    @property
    def think_limit(self) -> int | None:
        """THINK ids one transmission may hold (None: no limit)."""
        return self.reasoning.max_tokens if self.reasoning is not None else None

    def count_think(self) -> None:
        """One more THINK id, counted as the budget counts them (every id after a
        `<|think|>`, its framing "\\n" too, all THINK blocks of the transmission together);
        the first one past `max_tokens` is Refused (reported once)."""
        self.think_ids += 1
        limit = self.think_limit
        if limit is not None and self.think_ids == limit + 1:
            raise Refused(f"more than ctrl.reasoning.max_tokens ({limit}) THINK ids")

    def end(self, transmission: Transmission, *, strict: bool) -> None:
        """`<|eot|>`: back between transmissions, then the whole transmission's rules; the
        reasoning its CTRL sets is in force from here. Refused names the block at fault."""
        self.phase = Phase.BETWEEN
        self.think_ids = 0
        if not transmission.blocks and strict:
            raise Refused("an empty transmission (<|eot|> with no block before it)")
        try:
            reasoning = check([transmission], strict=strict)
        except SmiError as exc:
            raise Refused(exc.reason, exc.block) from None
        if reasoning is not None:
            self.reasoning = reasoning

    def finish(self, *, strict: bool) -> None:
        """The end of the stream: strict refuses an open transmission."""
        if strict and self.phase is not Phase.BETWEEN:
            raise Refused("the stream ended inside a transmission (no <|eot|>)")
