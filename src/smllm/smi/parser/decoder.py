"""The `Decoder` protocol: what the parser needs of an incremental decoder of payload ids.

The parser owns it because it is the consumer; the vocabulary wing (`vocab/decode.py`,
`vocab/metaspace.py`) implements it for each decoder family without importing it (a protocol
is structural), so the lower room never depends on the higher one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Decoder", "FastStep"]

#: `(step, arg, held)`: `step(arg, id)` does `Decoder.step(id)`'s work, or gives None where
#: `held(id)` must do it (`held` is None when `step` never gives None)
FastStep = tuple[Callable[[Any, int], str | None], Any, Callable[[int], str] | None]


@runtime_checkable
class Decoder(Protocol):
    """Text from payload ids, one id at a time; only complete characters come out."""

    def step(self, token_id: int) -> str:
        """The text this id completes ("" while a character is still incomplete). Raises
        ValueError for an id the vocabulary doesn't have."""
        ...

    def flush(self) -> str:
        """The rest of the current piece (an incomplete tail as U+FFFD); starts a new piece."""
        ...

    def reset(self) -> None:
        """Forget the current piece without returning its tail."""
        ...

    def fast_step(self) -> FastStep:
        """`step` for a hot loop, as a `FastStep`: a table decoder gives `(dict.get, its texts,
        step)` (one dict lookup per id whose text is whole), any other `(its step function,
        itself, None)`. Valid until the next call of a method of the decoder: the parser asks
        again after each one."""
        ...
