"""Incremental, UTF-8-safe decoding of payload ids, one id at a time (smi-notes §4.6).

Decoding each id on its own turns a character split across byte-level tokens into U+FFFD, and
"decode the prefix and slice" can change text already shown. A `Decoder` returns only complete
characters from `step`, keeps an incomplete tail until a later id completes it, and gives the
rest at `flush` (the end of a payload piece: the next structural id or a token run). The
parser calls `reset` at each block start, so nothing of one payload leaks into the next.

- `BytesDecoder` is for vocabularies whose ids map to raw bytes (the RWKV world trie): an
  incremental UTF-8 decoder with errors "replace", so a byte that can never start or continue
  a character becomes U+FFFD at once, and a tail that is still incomplete at `flush` becomes
  one U+FFFD.
- `HFDecoder` is for any Hugging Face tokenizer (ByteLevel, Metaspace, WordPiece, …), built on
  `tokenizers.decoders.DecodeStream(skip_special_tokens=False)` and recreated per piece. What
  it yields over a piece always adds up to `backend.decode(piece_ids,
  skip_special_tokens=False)` of the whole piece: `flush` compares and gives the remainder.
  Observed with tokenizers 0.23.3: a Metaspace decoder with `prepend_scheme` "first" or
  "always" drops the leading space of the first token of each decode call (`"▁test"` decodes
  to `"test"`), and DecodeStream does the same for the first token of a stream. With "first",
  a payload piece is encoded with "never" (`PlainEncoder`: it follows a structural id or a
  token run, so it is never first), so `HFDecoder` decodes with a copy of the tokenizer whose
  Metaspace decoder says "never" too; with the tokenizer's own decoder, the text after a token
  run lost its leading space (`["x", run, " after"]` came back as `"after"`). With "always",
  every piece is encoded with a `▁` in front, which the decoder's strip removes again. WordPiece's
  Whitespace pre-tokenizer drops every newline and space at encode time, so its payloads come
  back without the framing newlines and with single spaces between words (lossy by
  construction, not by decoding).
"""

from __future__ import annotations

import codecs
import json
import types
import weakref
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["BytesDecoder", "Decoder", "HFDecoder", "decoder_for", "fast_step", "piece_backend"]

_REPLACEMENT = "\ufffd"


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


class BytesDecoder:
    """Raw token bytes through an incremental UTF-8 decoder (errors "replace")."""

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._decode = self._decoder.decode

    def step(self, token_id: int) -> str:
        try:
            data = self._token_bytes(token_id)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"id {token_id} has no bytes in this vocabulary ({exc})") from None
        if not isinstance(data, bytes) and not isinstance(data, bytearray):
            raise ValueError(f"id {token_id}: token_bytes gave {type(data).__name__}, not bytes")
        return self._decode(data, False)

    def flush(self) -> str:
        text = str(self._decoder.decode(b"", True))
        self._decoder.reset()
        return text

    def reset(self) -> None:
        self._decoder.reset()


class HFDecoder:
    """A Hugging Face tokenizer's decoder, streamed through `DecodeStream` piece by piece.

    `tokenizer` is a `tokenizers.Tokenizer` or anything with a `backend_tokenizer` (a
    `PreTrainedTokenizerFast`). The ids of the current piece are kept, so `flush` can check the
    streamed text against one decode of the whole piece and give exactly the remainder; should
    DecodeStream ever fail (it refuses when a decoder rewrites text it already gave), the piece
    goes on by whole-piece decoding, emitting only what extends the text already given.

    A plain ByteLevel decoder is byte concatenation then lossy UTF-8, so DecodeStream (which
    emits only up to a complete character) already adds up to the whole decode: one stream
    serves every piece, nothing is kept, and the tail at `flush`/`reset` comes from stepping a
    plain ASCII id (`"a"`) and dropping it (an incomplete tail + "a" decodes to U+FFFD + "a").
    """

    def __init__(self, tokenizer: Any) -> None:
        from tokenizers import Tokenizer

        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        if not isinstance(backend, Tokenizer):
            raise ValueError(
                "HFDecoder needs a tokenizers.Tokenizer or a fast tokenizer with "
                f"backend_tokenizer, not {type(tokenizer).__name__}"
            )
        self._backend, self._sentinel = _piece(backend)
        #: ids below this have a token (a decoder made before tokens were added doesn't know
        #: them: make a new one)
        self._size: int = self._backend.get_vocab_size(with_added_tokens=True)
        self._stream: Any = None
        self._ids: list[int] = []
        self._given: list[str] = []
        self._streaming = True
        self._held = False  # byte-level: an id since the last clean point gave no text
        self._new_stream()

    def _new_stream(self) -> None:
        from tokenizers.decoders import DecodeStream

        self._stream = DecodeStream(skip_special_tokens=False)
        self._stream_step: Callable[[Any, int], str | None] = self._stream.step

    def reset(self) -> None:
        if self._sentinel is not None:
            if self._held:
                self._tail()
            return
        self._new_stream()
        self._ids = []
        self._given = []
        self._streaming = True

    def _tail(self) -> str:
        self._held = False
        assert self._sentinel is not None
        text = self._stream_step(self._backend, self._sentinel)
        return text[:-1] if text else ""

    def raw_step(self) -> tuple[Callable[[Any, int], str | None], Any, Callable[[int], str]] | None:
        """Byte-level only: `(step, backend, held)` (see `fast_step`), DecodeStream's own step
        on the one stream this decoder keeps; None otherwise."""
        if self._sentinel is None:
            return None
        return self._stream_step, self._backend, self.held

    def held(self, token_id: int) -> str:
        """Byte-level: after DecodeStream gave None (or failed) for `token_id`."""
        if not 0 <= token_id < self._size:
            raise ValueError(f"id {token_id} is not in the tokenizer's vocabulary")
        self._held = True
        return ""

    def _decode(self) -> str:
        return str(self._backend.decode(self._ids, skip_special_tokens=False))

    def step(self, token_id: int) -> str:
        if self._sentinel is not None:
            try:
                text = self._stream_step(self._backend, token_id)
            except Exception:
                self.held(token_id)  # an id outside the vocabulary: ValueError
                raise
            return text if text is not None else self.held(token_id)
        if not 0 <= token_id < self._size:
            raise ValueError(f"id {token_id} is not in the tokenizer's vocabulary")
        self._ids.append(token_id)
        piece: str | None = None
        if self._streaming:
            try:
                piece = self._stream.step(self._backend, token_id)
            except Exception:  # DecodeStream's InvalidPrefix: carry on by whole decodes
                self._streaming = False
        if not self._streaming:
            full = self._decode()
            given = "".join(self._given)
            if full.endswith(_REPLACEMENT) or not full.startswith(given):
                return ""
            piece = full[len(given) :]
        if piece:
            self._given.append(piece)
            return piece
        return ""

    def flush(self) -> str:
        if self._sentinel is not None:
            return self._tail() if self._held else ""
        given = "".join(self._given)
        full = self._decode() if self._ids else ""
        self.reset()
        # the whole decode is the truth; a decoder that rewrote given text can't be undone,
        # so then only a longer ending is added
        if full.startswith(given):
            return full[len(given) :]
        return ""


def _call(step: Callable[[int], str], token_id: int) -> str:
    return step(token_id)


def fast_step(
    decoder: Decoder,
) -> tuple[Callable[[Any, int], str | None], Any, Callable[[int], str] | None]:
    """`(step, arg, held)` for a hot loop: `step(arg, id)` does `decoder.step(id)`'s work; where
    it gives None or raises, `held(id)` finishes it (ValueError for an unknown id, else "");
    `held` is None when `step` never does. Valid for the decoder's lifetime."""
    raw = getattr(decoder, "raw_step", None)
    fast = raw() if raw is not None else None
    if fast is not None:
        return fast  # type: ignore[no-any-return]
    method = decoder.step
    if isinstance(method, types.MethodType):
        return method.__func__, method.__self__, None
    return _call, method, None


#: backend -> (vocabulary size, its piece copy or None when it is fine as it is, the byte-level
#: sentinel id or None)
_PIECE_BACKENDS: weakref.WeakKeyDictionary[Any, tuple[int, Any, int | None]] = (
    weakref.WeakKeyDictionary()
)


def _never(node: Any) -> bool:
    """Metaspace `prepend_scheme "first"` → `"never"` in a decoder's JSON, walking Sequences
    (as `PlainEncoder` does to encode: a segment is never first; `"always"` prepends a `▁` to
    every piece when encoding, so its decoder rightly strips one and stays)."""
    changed = False
    if isinstance(node, dict):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
            node["prepend_scheme"] = "never"
            changed = True
        for child in node.get("decoders") or ():
            changed = _never(child) or changed
    return changed


def _sentinel(backend: Any, decoder: Any) -> int | None:
    """A plain ByteLevel decoder's id for "a", when it decodes to "a" alone."""
    if not isinstance(decoder, dict) or decoder.get("type") != "ByteLevel":
        return None
    token_id = backend.token_to_id("a")
    if token_id is None or backend.decode([token_id], skip_special_tokens=False) != "a":
        return None
    return int(token_id)


def _piece(backend: Any) -> tuple[Any, int | None]:
    size = backend.get_vocab_size(with_added_tokens=True)
    cached = _PIECE_BACKENDS.get(backend)
    if cached is not None and cached[0] == size:
        return cached[1] or backend, cached[2]
    data = json.loads(backend.to_str())
    copy = None
    if _never(data.get("decoder")):
        from tokenizers import Tokenizer

        copy = Tokenizer.from_str(json.dumps(data))
    sentinel = _sentinel(backend, data.get("decoder"))
    _PIECE_BACKENDS[backend] = (size, copy, sentinel)  # the copy holds no reference to the key
    return copy or backend, sentinel


def piece_backend(backend: Any) -> Any:
    """The backend to decode payload pieces with: `backend` itself, or (for a Metaspace
    decoder that strips a first `▁`) a copy that doesn't, made once per backend and vocabulary
    size (a copy made before tokens were added is made again)."""
    return _piece(backend)[0]


def decoder_for(vocabulary: Any) -> Decoder:
    """The decoder that fits: `BytesDecoder` for an object with `token_bytes(id) -> bytes` (a
    trie encoder), `HFDecoder` for a Hugging Face tokenizer."""
    token_bytes = getattr(vocabulary, "token_bytes", None)
    if callable(token_bytes):
        return BytesDecoder(token_bytes)
    return HFDecoder(vocabulary)
