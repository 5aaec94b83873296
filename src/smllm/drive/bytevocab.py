"""A byte vocabulary for scripted runs: ids 0-255 are the bytes of UTF-8 text, the SMI block
follows at 256. It needs no tokenizer, so `smllm run --backend scripted:FILE` works on the core
install; a scripted model speaks in it exactly as a real one speaks in its own."""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from ..smi.parser.decoder import FastStep
from ..smi.tokens import BLOCK_SIZE, TokenIds

__all__ = ["BYTE_IDS", "BYTE_VOCAB", "ByteDecoder", "ByteEncoder"]

#: the SMI block's ids after the 256 bytes
BYTE_IDS = TokenIds.contiguous(256)
BYTE_VOCAB = 256 + BLOCK_SIZE


class ByteEncoder:
    """Text as its UTF-8 bytes (`compile.Encoder`): no id of the SMI block can come out."""

    forbidden: frozenset[int] = BYTE_IDS.all

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8", "surrogatepass"))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]


class ByteDecoder:
    """Payload ids back to text, one byte at a time (`parser.decoder.Decoder`)."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def step(self, token_id: int) -> str:
        if not 0 <= token_id < 256:
            raise ValueError(f"id {token_id} is not a byte of the byte vocabulary")
        return self._utf8.decode(bytes((token_id,)))

    def flush(self) -> str:
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text

    def reset(self) -> None:
        self._utf8.reset()

    def fast_step(self) -> FastStep:
        return (ByteDecoder.step, self, None)
