"""A streaming parser for SMI token ids: model output as it is sampled, or whole conversations.

- `grammar`: the structure as a state machine over structural ids (`Phase`, `Grammar`): which
  side, block order, reasoning, the THINK count;
- `stream_parser`: `StreamParser` and `parse_ids`, the payload path (decoding, framing, token
  runs) and `feed`'s inline fast path;
- `decoder`: the `Decoder` protocol the parser consumes (its `fast_step` included); the
  decoders themselves are the vocabulary wing's (`vocab/decode.py`, `vocab/metaspace.py`);
- `events`: what the parser reports, and `ParseError`.

Ids outside the text vocabulary (`is_text` false, or inside a `modalities` range) become
`TokenRun` parts, one run per stretch of one modality, and `PayloadTokens` events.

Feeding ids one at a time or in chunks of any size gives the same events: every id is
handled on its own and nothing depends on where a chunk ends.

Strict mode raises `ParseError` (an `SmiError` with the id's position and the events the
failing `feed` produced before it) at the first broken rule; the parser then refuses further
input. Lenient mode never raises: a misplaced structural or reserved id becomes a `Violation`
event and is skipped (the block it interrupted goes on), text before any block start opens an
implicit block (OUT, or USR for a runtime stream), and an empty transmission is allowed.
"""

from __future__ import annotations

from .decoder import Decoder, FastStep
from .events import (
    BlockEnd,
    BlockStart,
    EndOfTransmission,
    Event,
    ParseError,
    PayloadText,
    PayloadTokens,
    Violation,
)
from .grammar import Grammar, Phase, Side
from .stream_parser import StreamParser, parse_ids

__all__ = [
    "BlockEnd",
    "BlockStart",
    "Decoder",
    "EndOfTransmission",
    "Event",
    "FastStep",
    "Grammar",
    "ParseError",
    "PayloadText",
    "PayloadTokens",
    "Phase",
    "Side",
    "StreamParser",
    "Violation",
    "parse_ids",
]
