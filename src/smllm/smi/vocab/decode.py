"""Incremental, UTF-8-safe decoding of payload ids, one id at a time (smi-notes §4.6).

Decoding each id on its own turns a character split across byte-level tokens into U+FFFD, and
"decode the prefix and slice" can change text already shown. A decoder here (the parser's
`Decoder` protocol, smi/parser/decoder.py) returns only complete characters from `step`, keeps
an incomplete tail until a later id completes it, and gives the rest at `flush` (the end of a
payload piece: the next structural id or a token run). The parser calls `reset` at each block
start, so nothing of one payload leaks into the next.

- `BytesDecoder` is for vocabularies whose ids stand for raw bytes: the RWKV world trie
  (`token_bytes`) and every Hugging Face tokenizer whose decoder is a plain ByteLevel (GPT-2,
  GPT-NeoX as in Mamba, Llama 3, Qwen: `decoder_for` picks it). Their decode is, by
  definition, the ids' bytes joined, then UTF-8 with errors replaced, so an incremental UTF-8
  decoder (errors "replace") over each id's bytes gives exactly `decode` of the piece: a byte
  that can never start or continue a character becomes U+FFFD at once, a tail still incomplete
  at `flush` becomes one U+FFFD. A ByteLevel token's bytes are its characters mapped back
  through GPT-2's byte-to-character table, or, when one of its characters is not in that
  table (an added token such as `<tool call>`), the token's own UTF-8 (the rule of the
  tokenizers ByteLevel decoder; the tests check it against `decode` over whole vocabularies and
  random id sequences). Each id's bytes are learnt the first time an id is seen (`ByteTable`,
  one per vocabulary, shared by its decoders); ids whose bytes are whole characters also keep
  their text, which the parser's inline path reads with one dict lookup (`fast_step`): several
  times cheaper than a `DecodeStream.step`.
- `PieceDecoder` (metaspace.py) is for the `▁` family: a Metaspace decoder, or Replace `▁` +
  ByteFallback + Fuse (+ Strip) as in Llama 2, Mistral and Gemma; its `PieceTable` is learnt and
  shared the same way.
- `HFDecoder` is for any other Hugging Face tokenizer (WordPiece, …), and for any tokenizer
  when made directly (the tests compare the two paths). It is built on
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
import weakref
from collections.abc import Callable
from typing import Any

from .backend import backend_of, never_first
from .metaspace import PieceDecoder, PieceTable, decoder_shape

__all__ = [
    "ByteTable",
    "BytesDecoder",
    "HFDecoder",
    "PieceDecoder",
    "VocabDecoder",
    "decoder_for",
    "piece_backend",
    "token_bytes_of",
    "vocabulary_table",
]

_REPLACEMENT = "\ufffd"


class ByteTable:
    """The bytes of a vocabulary's ids, learnt as ids come (a vocabulary of 128k ids is never
    walked whole): `texts` holds the text of each id seen whose bytes are whole UTF-8
    characters. Ids keep their bytes: tokens are only ever appended to a vocabulary."""

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._bytes: dict[int, bytes] = {}
        self.texts: dict[int, str] = {}

    def __getitem__(self, token_id: int) -> bytes:
        data = self._bytes.get(token_id)
        if data is not None:
            return data
        try:
            data = self._token_bytes(token_id)
        except (KeyError, IndexError, ValueError, OverflowError) as exc:
            raise ValueError(f"id {token_id} has no bytes in this vocabulary ({exc})") from None
        if not isinstance(data, bytes) and not isinstance(data, bytearray):
            raise ValueError(f"id {token_id}: token_bytes gave {type(data).__name__}, not bytes")
        data = self._bytes[token_id] = bytes(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # a part of a character: always through the incremental decoder
        self.texts[token_id] = text
        return data


#: `fast_step`'s table while a character is incomplete: every id takes `step`
_NOTHING: dict[int, str] = {}


class BytesDecoder:
    """Raw token bytes through an incremental UTF-8 decoder (errors "replace")."""

    def __init__(self, token_bytes: Callable[[int], bytes] | ByteTable, owner: Any = None) -> None:
        self._owner = owner  # a shared table's vocabulary, kept alive while this decoder is
        self._table = token_bytes if isinstance(token_bytes, ByteTable) else ByteTable(token_bytes)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._decode = self._decoder.decode

    def step(self, token_id: int) -> str:
        return self._decode(self._table[token_id], False)

    def fast_step(self) -> tuple[Callable[[Any, int], str | None], Any, Callable[[int], str]]:
        """`(dict.get, texts, step)` (the parser's `Decoder.fast_step`): while no character is
        incomplete, an id with whole characters is its text; any other id (None) takes `step`.
        Valid until the next call of a method of this decoder."""
        pending = self._decoder.getstate()[0]
        return dict.get, _NOTHING if pending else self._table.texts, self.step

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
    """

    def __init__(self, tokenizer: Any) -> None:
        self._backend = piece_backend(backend_of(tokenizer))
        #: ids below this have a token (a decoder made before tokens were added doesn't know
        #: them: make a new one)
        self._size: int = self._backend.get_vocab_size(with_added_tokens=True)
        self._stream: Any = None
        self._ids: list[int] = []
        self._given: list[str] = []
        self._streaming = True
        self.reset()

    def reset(self) -> None:
        from tokenizers.decoders import DecodeStream

        self._stream = DecodeStream(skip_special_tokens=False)
        self._ids = []
        self._given = []
        self._streaming = True

    def _decode(self) -> str:
        return str(self._backend.decode(self._ids, skip_special_tokens=False))

    def step(self, token_id: int) -> str:
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

    def fast_step(self) -> tuple[Callable[[Any, int], str | None], Any, None]:
        """`(step, self, None)` (the parser's `Decoder.fast_step`): no table, every id is a
        call of `step`."""
        return type(self).step, self, None

    def flush(self) -> str:
        given = "".join(self._given)
        full = self._decode() if self._ids else ""
        self.reset()
        # the whole decode is the truth; a decoder that rewrote given text can't be undone,
        # so then only a longer ending is added
        if full.startswith(given):
            return full[len(given) :]
        return ""


#: backend -> (vocabulary size, its piece copy or None when it is fine as it is)
_PIECE_BACKENDS: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = weakref.WeakKeyDictionary()


def piece_backend(backend: Any) -> Any:
    """The backend to decode payload pieces with: `backend` itself, or (for a Metaspace
    decoder that strips a first `▁`) a copy that doesn't, made once per backend and vocabulary
    size (a copy made before tokens were added is made again)."""
    size = backend.get_vocab_size(with_added_tokens=True)
    cached = _PIECE_BACKENDS.get(backend)
    if cached is not None and cached[0] == size:
        return cached[1] or backend
    data = json.loads(backend.to_str())
    copy = None
    if never_first(data.get("decoder")):
        from tokenizers import Tokenizer

        copy = Tokenizer.from_str(json.dumps(data))
    _PIECE_BACKENDS[backend] = (size, copy)  # the copy holds no reference to the key
    return copy or backend


def _byte_level_chars() -> dict[int, int]:
    """GPT-2's byte-to-character table, reversed for `str.translate`: each of its characters to
    its byte; every other character below 256 to one above, so `encode("latin-1")` fails on a
    token that has one (it is then taken as UTF-8, as the ByteLevel decoder does)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    table = {b: b for b in printable}
    table.update({0x100 + n: b for n, b in enumerate(others)})
    table.update({b: 0x10FFFF for b in others})
    return table


_BYTE_LEVEL: dict[int, int] = {}


def _byte_level_bytes(backend: Any, token_id: int) -> bytes:
    """A ByteLevel token's bytes: its characters through GPT-2's table, or its UTF-8 when one
    of them is not in the table."""
    token = backend.id_to_token(token_id) if token_id >= 0 else None
    if token is None:
        raise ValueError("not in the tokenizer's vocabulary")
    if not _BYTE_LEVEL:
        _BYTE_LEVEL.update(_byte_level_chars())
    try:
        return str(token).translate(_BYTE_LEVEL).encode("latin-1")
    except UnicodeEncodeError:
        return str(token).encode("utf-8")


def _token_bytes(vocabulary: Any, token_id: int) -> bytes:
    return vocabulary.token_bytes(token_id)  # type: ignore[no-any-return]


Table = ByteTable | PieceTable

#: backend -> (its decoder's JSON, its table), the table shared by its decoders (a turn's
#: parser learns nothing anew); a table refers to its vocabulary weakly and each decoder holds
#: the vocabulary strongly. A backend given another decoder gets a new table.
_TABLES: weakref.WeakKeyDictionary[Any, tuple[bytes | None, Table]] = weakref.WeakKeyDictionary()
#: the same for vocabularies with `token_bytes` (the RWKV trie)
_TRIE_TABLES: weakref.WeakKeyDictionary[Any, ByteTable] = weakref.WeakKeyDictionary()


def _trie_table(vocabulary: Any) -> ByteTable:
    try:
        table = _TRIE_TABLES.get(vocabulary)
    except TypeError:  # not weakly referable: a table of its own
        return ByteTable(lambda token_id: _token_bytes(vocabulary, token_id))
    if table is None:
        owner = weakref.ref(vocabulary)
        table = _TRIE_TABLES[vocabulary] = ByteTable(lambda i: _token_bytes(owner(), i))
    return table


def vocabulary_table(tokenizer: Any) -> Table | None:
    """The table of a Hugging Face tokenizer whose decoder reads each token on its own: a
    `ByteTable` for a plain ByteLevel, a `PieceTable` for the `▁` family (metaspace.py); one
    per backend and decoder. None for any other decoder (WordPiece, …)."""
    from tokenizers.decoders import ByteLevel

    backend = backend_of(tokenizer)
    decoder = backend.decoder
    state = decoder.__getstate__() if decoder is not None else None
    cached = _TABLES.get(backend)
    if cached is not None and cached[0] == state:
        return cached[1]
    owner = weakref.ref(backend)
    table: Table
    if isinstance(decoder, ByteLevel):
        table = ByteTable(lambda token_id: _byte_level_bytes(owner(), token_id))
    else:
        shape = decoder_shape(state)
        if shape is None:
            return None
        table = PieceTable(shape, lambda token_id: owner().id_to_token(token_id))  # type: ignore[union-attr]
    _TABLES[backend] = (state, table)
    return table


def token_bytes_of(tokenizer: Any) -> Callable[[int], bytes] | None:
    """Each id's bytes as a Hugging Face tokenizer's decoder joins them (`vocabulary_table`: a
    ByteLevel token's bytes; a `▁`-family token's text, or its ByteFallback byte), for the
    budget's whole-character cut and the constraint's grammar; None where the decoder doesn't
    join bytes (WordPiece and the like)."""
    table = vocabulary_table(tokenizer)
    if table is None:
        return None
    if isinstance(table, ByteTable):
        return table.__getitem__
    pieces = table

    def token_bytes(token_id: int) -> bytes:
        byte = pieces.learn(token_id)  # a ByteFallback byte, or None for a text piece
        return bytes([byte]) if byte is not None else pieces.texts[token_id].encode("utf-8")

    return token_bytes


#: the decoders of this wing, each one the parser's `Decoder` protocol (smi/parser/decoder.py:
#: the parser, a higher room, owns the protocol; this is what `load.Vocabulary` hands it)
VocabDecoder = BytesDecoder | HFDecoder | PieceDecoder


def decoder_for(vocabulary: Any) -> VocabDecoder:
    """The decoder that fits: `BytesDecoder` for an object with `token_bytes(id) -> bytes` (a
    trie encoder) or a Hugging Face tokenizer with a plain ByteLevel decoder, `PieceDecoder`
    for one of the `▁` family, `HFDecoder` for any other."""
    if callable(getattr(vocabulary, "token_bytes", None)):
        return BytesDecoder(_trie_table(vocabulary), vocabulary)
    table = vocabulary_table(vocabulary)
    if table is None:
        return HFDecoder(vocabulary)
    backend = getattr(vocabulary, "backend_tokenizer", vocabulary)
    if isinstance(table, ByteTable):
        return BytesDecoder(table, backend)
    return PieceDecoder(table, backend)
