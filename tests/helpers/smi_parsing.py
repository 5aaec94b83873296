"""Shared helpers of the SMI parser tests: a toy byte-level vocabulary (ids 0-255 are bytes,
a few merges such as "\\n\\n", every non-ASCII character split across byte ids), streams built
the way the compiler builds them, and hypothesis strategies for blocks and conversations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from smllm.smi.parser import EndOfTransmission, Event, StreamParser
from smllm.smi.stream import Block, TokenRun, Transmission
from smllm.smi.tokens import MODEL_SIDE, Kind, TokenIds
from smllm.smi.vocab.decode import BytesDecoder

__all__ = [
    "ALPHABET",
    "AUDIO",
    "BY_BYTES",
    "IMAGE",
    "MERGES",
    "MODALITIES",
    "SETTINGS",
    "TOY",
    "TOY_IDS",
    "block_ids",
    "conversations",
    "feed_all",
    "model_block",
    "model_transmission",
    "normalized",
    "parts",
    "runs",
    "runtime_block",
    "runtime_transmission",
    "stream_ids",
    "texts",
    "toy_decoder",
    "toy_encode",
    "toy_parser",
    "transmissions_of",
]

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- a toy byte-level vocabulary ---------------------------------------------------------------

MERGES = [b"\n\n", b"\n\n\n", b" \n", b"\nhe", b"llo\n", b"o\n\n", b"  ", b"\xf0\x9f"]
TOY: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
TOY.update({256 + i: m for i, m in enumerate(MERGES)})
TOY_IDS = TokenIds.contiguous(1000)
IMAGE = range(2000, 2100)
AUDIO = range(3000, 3100)
MODALITIES = {"image": IMAGE, "audio": AUDIO}
BY_BYTES = {v: k for k, v in TOY.items()}
_LONGEST = max(len(m) for m in MERGES)


def toy_encode(text: str) -> list[int]:
    """Greedy longest match over the toy vocabulary."""
    data = text.encode()
    out, i = [], 0
    while i < len(data):
        for n in range(min(_LONGEST, len(data) - i), 0, -1):
            token = BY_BYTES.get(data[i : i + n])
            if token is not None:
                out.append(token)
                i += n
                break
    return out


def toy_decoder() -> BytesDecoder:
    return BytesDecoder(TOY.__getitem__)


def toy_parser(**kwargs: Any) -> StreamParser:
    return StreamParser(TOY_IDS, toy_decoder(), **kwargs)


# -- building streams --------------------------------------------------------------------------


def block_ids(block: Block, ids: TokenIds, encode: Callable[[str], list[int]]) -> list[int]:
    """One block as the compiler writes it: TOKEN, then "\\n" + payload + "\\n", text pieces
    encoded around the token runs."""
    out = [ids[block.kind]]
    text = "\n"
    for part in block.parts:
        if isinstance(part, str):
            text += part
        else:
            out += encode(text) if text else []
            out += list(part.ids)
            text = ""
    out += encode(text + "\n")
    return out


def stream_ids(
    transmissions: Sequence[Transmission], ids: TokenIds, encode: Callable[[str], list[int]]
) -> list[int]:
    out: list[int] = []
    for transmission in transmissions:
        for block in transmission.blocks:
            out += block_ids(block, ids, encode)
        out.append(ids[Kind.EOT])
        out += encode("\n")
    return out


def feed_all(parser: StreamParser, token_ids: Sequence[int]) -> list[Event]:
    events: list[Event] = []
    for token_id in token_ids:
        events += parser.feed(token_id)
    return events + parser.finish()


def transmissions_of(events: Sequence[Event]) -> list[Transmission]:
    return [e.transmission for e in events if isinstance(e, EndOfTransmission)]


def normalized(kind: Kind, parts: Sequence[str | TokenRun]) -> Block:
    """The block the parser must give back: adjacent texts joined, empty texts dropped,
    adjacent runs of one modality joined."""
    out: list[str | TokenRun] = []
    for part in parts:
        if part == "":
            continue
        last = out[-1] if out else None
        if isinstance(part, str) and isinstance(last, str):
            out[-1] = last + part
        elif (
            isinstance(part, TokenRun)
            and isinstance(last, TokenRun)
            and last.modality == part.modality
        ):
            out[-1] = TokenRun(last.ids + part.ids, part.modality)
        else:
            out.append(part)
    return Block(kind, tuple(out))


# -- strategies --------------------------------------------------------------------------------

#: characters that stress the framing and UTF-8: newlines, spaces, CR, tab, accents, CJK,
#: emoji (4 bytes) and a ZWJ sequence
ALPHABET = ["\n", "\n", " ", " ", "a", "b", "h", "e", "l", "o", "\r", "\t", "é", "你", "🙂", "👩‍💻"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=12).map("".join)
runs = st.builds(
    lambda name, ids: TokenRun(tuple(ids), name),
    st.sampled_from(["image", "audio"]),
    st.lists(st.integers(0, 99), min_size=1, max_size=4),
).map(
    lambda r: TokenRun(
        tuple(i + (IMAGE if r.modality == "image" else AUDIO)[0] for i in r.ids), r.modality
    )
)
parts = st.lists(st.one_of(texts, texts, runs), max_size=4)
model_block = st.builds(normalized, st.sampled_from(sorted(MODEL_SIDE)), parts)
runtime_block = st.builds(
    normalized, st.sampled_from([Kind.SYS, Kind.DEV, Kind.USR, Kind.OBS]), parts
)
model_transmission = st.lists(model_block, min_size=1, max_size=4).map(Transmission.of)
runtime_transmission = st.lists(runtime_block, min_size=1, max_size=4).map(
    lambda blocks: Transmission.of(sorted(blocks, key=lambda b: int(b.kind)))
)
conversations = st.lists(st.one_of(model_transmission, runtime_transmission), max_size=4)
