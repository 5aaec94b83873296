"""Streaming decoding for SentencePiece-style vocabularies (the `▁` family), one id at a time.

Two Hugging Face decoder shapes cover them, and both are a function of each token's own text,
so a table learnt once per vocabulary replaces `DecodeStream` (as the byte table does for
ByteLevel, see decode.py):

- `Metaspace(replacement, prepend_scheme)` (T5, ALBERT, the conftest Metaspace BPEs): each
  token with its `▁` made a space; with "always", the first token of a decode call loses every
  `▁` instead. A payload piece is decoded as its own call with "first" read as "never" (as
  `piece_backend` does: a piece never comes first).
- `Sequence([Replace("▁", " "), ByteFallback, Fuse])`, with or without a last
  `Strip(" ", start=N, stop=0)` (Llama 2, Mistral, Gemma, Jamba, Zamba): each token with `▁`
  replaced, a `<0xNN>` token being the byte NN; a run of such bytes ("a group") decodes as
  UTF-8, or, when it isn't valid UTF-8, as one U+FFFD per byte; then the whole text loses up to
  N leading spaces.

`PieceDecoder` gives each complete character as soon as its bytes are in, so a group that turns
out invalid at a later byte has had its first characters given already: those stay, and each of
the group's bytes not yet given becomes U+FFFD (the tokenizer's `decode` would replace the
whole group). Only then does the stream differ from `decode`; the tests check equality on every
other stream, and this rule on the invalid ones. By that rule an ASCII byte token outside a group
gives the same stream whether it opens one or not, so it is read as its character, from the
table like any text token (JSON's `{` and `"` are byte tokens in some vocabularies).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PieceDecoder", "PieceTable", "Shape", "shape_of"]

_REPLACEMENT = "\ufffd"
#: `fast_step`'s table while the next text can't be read as it is: every id takes `step`
_NOTHING: dict[int, str] = {}


@dataclass(frozen=True)
class Shape:
    """What a decoder of the `▁` family does to a piece's tokens."""

    replacement: str  # the character that stands for a space ("▁")
    content: str  # what it becomes (" ")
    byte_fallback: bool  # `<0xNN>` tokens are bytes
    first_loses_replacement: bool  # Metaspace "always": the first token loses every `▁`
    strip: str = " "  # Strip's character
    strip_count: int = 0  # up to this many of them leave the start of the piece


def _type(node: Any) -> str | None:
    return node.get("type") if isinstance(node, dict) else None


def shape_of(decoder: Any) -> Shape | None:
    """The `Shape` of a decoder's JSON (a dict, as in tokenizer.json), None when it isn't
    one of the two."""
    if _type(decoder) == "Sequence" and len(decoder.get("decoders") or ()) == 1:
        decoder = decoder["decoders"][0]
    if _type(decoder) == "Metaspace":
        replacement = decoder.get("replacement")
        if not isinstance(replacement, str) or len(replacement) != 1:
            return None
        always = decoder.get("prepend_scheme") == "always"
        return Shape(replacement, " ", byte_fallback=False, first_loses_replacement=always)
    if _type(decoder) != "Sequence":
        return None
    parts = list(decoder.get("decoders") or ())
    strip = parts.pop() if len(parts) == 4 and _type(parts[-1]) == "Strip" else None
    if [_type(p) for p in parts] != ["Replace", "ByteFallback", "Fuse"]:
        return None
    pattern = parts[0].get("pattern")
    replacement = pattern.get("String") if isinstance(pattern, dict) else None
    content = parts[0].get("content")
    if not isinstance(replacement, str) or not replacement or not isinstance(content, str):
        return None
    if strip is None:
        return Shape(replacement, content, byte_fallback=True, first_loses_replacement=False)
    character, start, stop = strip.get("content"), strip.get("start"), strip.get("stop")
    if not isinstance(character, str) or len(character) != 1 or stop != 0:
        return None
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        return None
    return Shape(replacement, content, True, False, character, start)


def decoder_shape(state: bytes | None) -> Shape | None:
    """`shape_of` a decoder's `__getstate__()` (its JSON), None for no decoder."""
    return shape_of(json.loads(state)) if state else None


def _byte(token: str) -> int | None:
    """The byte of a ByteFallback token `<0xNN>` (as the decoder reads it), else None."""
    if len(token) != 6 or not token.startswith("<0x") or not token.endswith(">"):
        return None
    try:
        return int(token[3:5], 16)
    except ValueError:
        return None


class PieceTable:
    """A vocabulary's tokens as its decoder reads them, learnt as ids come: `texts` holds the
    text of each id seen, but for a ByteFallback byte above 0x7F (a part of a character)."""

    def __init__(self, shape: Shape, token_of: Callable[[int], str | None]) -> None:
        self.shape = shape
        self._token_of = token_of
        self.texts: dict[int, str] = {}
        self._bytes: dict[int, int] = {}
        self._first: dict[int, str] = {}  # Metaspace "always": as a piece's first token

    def _token(self, token_id: int) -> str:
        try:
            token = self._token_of(token_id) if token_id >= 0 else None
        except (OverflowError, ValueError, TypeError):
            token = None
        if token is None:
            raise ValueError(f"id {token_id} is not in the tokenizer's vocabulary")
        return str(token)

    def learn(self, token_id: int) -> int | None:
        """The byte of a ByteFallback token, None for a text token; either way its text in
        `texts` unless it is a byte above 0x7F. ValueError for an id the vocabulary doesn't
        have."""
        byte = self._bytes.get(token_id)
        if byte is not None or token_id in self.texts:
            return byte
        token = self._token(token_id)
        shape = self.shape
        byte = _byte(token) if shape.byte_fallback else None
        if byte is not None:
            self._bytes[token_id] = byte
            if byte < 0x80:
                self.texts[token_id] = chr(byte)
            return byte
        self.texts[token_id] = token.replace(shape.replacement, shape.content)
        return None

    def first_text(self, token_id: int) -> str:
        """A text token's text as the first token of a piece."""
        if not self.shape.first_loses_replacement:
            return self.texts[token_id]
        text = self._first.get(token_id)
        if text is None:
            text = self._first[token_id] = self._token(token_id).replace(self.shape.replacement, "")
        return text


class PieceDecoder:
    """A `PieceTable` streamed piece by piece (the parser's `Decoder` protocol)."""

    def __init__(self, table: PieceTable, owner: Any = None) -> None:
        self._owner = owner  # a shared table's vocabulary, kept alive while this decoder is
        self._table = table
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self.reset()

    def reset(self) -> None:
        self._utf8.reset()
        self._in_group = False  # bytes since the last text token
        self._broken = False  # the group is not UTF-8: its bytes are U+FFFD each
        self._first = self._table.shape.first_loses_replacement
        self._strip_left = self._table.shape.strip_count

    def step(self, token_id: int) -> str:
        table = self._table
        text = table.texts.get(token_id)
        if text is None or self._in_group:
            byte = table.learn(token_id)
            # an ASCII byte outside a group is its character (and a group that breaks at a
            # later byte gives the same stream either way: see the module's docstring)
            if byte is not None and (self._in_group or byte >= 0x80):
                return self._stripped(self._add_byte(byte))
            text = table.texts[token_id]
        if self._first:
            self._first = False
            text = table.first_text(token_id)
        if self._in_group:
            text = self._end_group() + text
        return self._stripped(text) if self._strip_left else text

    def fast_step(self) -> tuple[Callable[[Any, int], str | None], Any, Callable[[int], str]]:
        """`(dict.get, texts, step)` (the parser's `Decoder.fast_step`): a text token is its text
        while no group is open and the piece's start is settled; any other id takes `step`.
        Valid until the next call of a method of this decoder."""
        settled = not self._in_group and not self._first and not self._strip_left
        return dict.get, self._table.texts if settled else _NOTHING, self.step

    def flush(self) -> str:
        text = self._end_group() if self._in_group else ""
        text = self._stripped(text) if self._strip_left else text
        self.reset()
        return text

    def _add_byte(self, byte: int) -> str:
        self._in_group = True
        if self._broken:
            return _REPLACEMENT
        held = self._utf8.getstate()[0]
        try:
            return self._utf8.decode(bytes((byte,)))
        except UnicodeDecodeError:
            self._broken = True
            self._utf8.reset()
            return _REPLACEMENT * (len(held) + 1)

    def _end_group(self) -> str:
        """The group's end: an incomplete character's bytes are U+FFFD each."""
        held = self._utf8.getstate()[0]
        self._utf8.reset()
        self._in_group = self._broken = False
        return _REPLACEMENT * len(held)

    def _stripped(self, text: str) -> str:
        """Strip's leading characters, until the first other one."""
        while self._strip_left and text[:1] == self._table.shape.strip:
            text = text[1:]
            self._strip_left -= 1
        if text:
            self._strip_left = 0
        return text
