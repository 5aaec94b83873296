"""What the parser reports: events as ids complete them, and the strict parser's refusal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..stream import Block, SmiError, Transmission
from ..tokens import Kind

__all__ = [
    "BlockEnd",
    "BlockStart",
    "EndOfTransmission",
    "Event",
    "ParseError",
    "PayloadText",
    "PayloadTokens",
    "Violation",
]


@dataclass(frozen=True, slots=True)
class BlockStart:
    kind: Kind


@dataclass(frozen=True, slots=True, init=False)
class PayloadText:
    """A piece of a block's payload text (framing removed); the pieces of a block add up to
    its text."""

    kind: Kind
    text: str

    def __init__(self, kind: Kind, text: str) -> None:
        # frozen: set through the slots, twice as fast as the generated object.__setattr__
        _set_kind(self, kind)
        _set_text(self, text)


_set_kind = cast(Any, PayloadText.__dict__["kind"]).__set__
_set_text = cast(Any, PayloadText.__dict__["text"]).__set__


@dataclass(frozen=True, slots=True)
class PayloadTokens:
    """Ids of another modality inside a payload, as they arrive."""

    kind: Kind
    ids: tuple[int, ...]
    modality: str | None = None


@dataclass(frozen=True, slots=True)
class BlockEnd:
    block: Block


@dataclass(frozen=True, slots=True)
class EndOfTransmission:
    transmission: Transmission


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken rule, in lenient mode (strict mode raises instead); `position` is the 0-based
    index of the offending id in everything fed so far."""

    message: str
    position: int


Event = BlockStart | PayloadText | PayloadTokens | BlockEnd | EndOfTransmission | Violation


class ParseError(SmiError):
    """A strict parser's refusal: `position` is the offending id's 0-based index in the
    stream; `events` are those the failing call produced before it (already valid)."""

    def __init__(
        self,
        message: str,
        transmission: int | None,
        block: int | None,
        position: int,
        events: Sequence[Event] = (),
    ) -> None:
        super().__init__(f"{message} (at id {position})", transmission, block)
        self.position = position
        self.events: tuple[Event, ...] = tuple(events)
