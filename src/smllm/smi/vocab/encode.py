"""Encode untrusted payload text so that it can never yield a structural or markup id.

`PlainEncoder` owns a second `tokenizers.Tokenizer` built from the tokenizer's JSON with its added
vocabulary cut down to the *content* tokens (`added.classify`: GPT-NeoX's whitespace runs, …):
no markup token is left for a payload to match, special or not (`split_special_tokens=True`
still matches *non-special* added tokens such as a base vocabulary's `<tool_call>`, and it works
by flipping a flag on the shared backend, which races with other threads), while content tokens
come out exactly where the full tokenizer gives them. The copy is private and never mutated, so
it is thread-safe, and every result is checked against `forbidden` (the markup ids, the
tokenizer's other special ids and the SMI block) all the same (`added.check_ids`; defence in
depth: a regular vocabulary entry spelling a control token, reachable by merges, is caught).

The copy differs from the tokenizer in three more ways, each so that `encode(segment)` equals the
ids the full tokenizer gives that segment inside the whole rendered string (parity):
- no post-processor (no BOS/EOS around a segment), no truncation, no padding;
- a Metaspace `prepend_scheme "first"` becomes `"never"` (`backend.never_first`: a segment
  follows a structural id, so it is never first);
- the model's unknown-token id (`[UNK]`, `<unk>`, read from `unk_token` or Unigram's `unk_id`)
  is not forbidden by default (`allow_unknown=True`): the model itself emits it for characters
  outside its vocabulary, and the copy has no markup that could match its text, so it carries
  no structure, while forbidding it would refuse any benign payload with, say, an emoji on a
  BERT vocabulary.

A literal `▁` (U+2581) in a payload on a `▁` vocabulary (a Metaspace pre-tokenizer or a
`Replace(" ", "▁")` normaliser) reads as a space to the tokenizer, so it would come back as a
space. Where the model falls back to bytes and the decoder turns `<0xNN>` tokens into bytes
(Llama, Mistral, Gemma), it is encoded as its UTF-8 byte tokens `<0xE2><0x96><0x81>` instead and
round-trips (`literal_u2581` is "bytes"): the text is encoded with a private-use character that
no vocabulary token holds in each `▁`'s place (byte fallback spells it in bytes), then those bytes
become `▁`'s. Elsewhere on a `▁` vocabulary it stays as the tokenizer reads it, a space
(`literal_u2581` is "space"; the audit says so).

Parity holds because the full tokenizer first splits the whole string at every added token, then
normalises, pre-tokenises and models each remaining piece on its own, exactly what the copy does
to one segment (with the same content tokens in its added vocabulary, matched the same way). It
needs what `install_tokens` guarantees: the SMI tokens are unnormalised and strip nothing (an
`lstrip`/`rstrip` token would eat the segment's framing whitespace), and no added token holds an
SMI token's text plus more. Tested with no mismatch: GPT-NeoX-style ByteLevel BPE with its
whitespace runs, Llama-style Metaspace with byte fallback, ByteLevel BPE (with and without
`add_prefix_space`, without its regex), Metaspace BPE (`first`, `always`, `split=False`, inside
a Sequence), a Llama-2-style normaliser (`Prepend("▁")` + `Replace`), Unigram with NFKC,
BERT-style WordPiece, and the RWKV trie (trie.py). Its limits, by construction:
- a stream must start with a structural id: with `first`, text at offset 0 of a whole string
  gets a `▁` the copy never gives (SMI streams always start with a token);
- parity is for trusted text: a payload holding a markup token's text (`<|eot|>`,
  `<tool_call>`) differs on purpose (the full tokenizer gives the token, the copy plain text),
  and so does a literal `▁` on a byte-fallback `▁` vocabulary (bytes here, a space there).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any, Literal

from ..stream import InjectionError
from ..tokens import TokenIds
from .added import AddedRole, check_ids, classify
from .backend import backend_of, never_first

__all__ = ["InjectionError", "PlainEncoder", "plain_backend"]

#: the character a `▁` vocabulary reads as a space, and its UTF-8 bytes
U2581 = "\u2581"
_U2581_BYTES = tuple(U2581.encode("utf-8"))


def plain_backend(
    tokenizer: Any, data: dict[str, Any] | None = None, keep: Collection[int] | None = None
) -> Any:
    """The private `tokenizers.Tokenizer` a `PlainEncoder` encodes with (module docstring);
    `data`: the tokenizer's JSON already parsed (it is changed); `keep`: the ids of the added
    tokens to keep (default: the content tokens by `added.classify`)."""
    from tokenizers import Tokenizer

    if data is None:
        data = json.loads(backend_of(tokenizer).to_str())
    if keep is None:
        keep = {r.id for r in classify(backend_of(tokenizer)) if r.role == "content"}
    data["added_tokens"] = [t for t in data.get("added_tokens") or () if t["id"] in keep]
    data["post_processor"] = None
    data["truncation"] = None
    data["padding"] = None
    never_first(data.get("pre_tokenizer"))
    never_first(data.get("decoder"))
    return Tokenizer.from_str(json.dumps(data))


def _spaces_as_u2581(node: Any) -> bool:
    """Whether a normaliser's or pre-tokeniser's JSON turns spaces into `▁` (Metaspace, or a
    Replace of " " by "▁"), walking Sequences."""
    if not isinstance(node, dict):
        return False
    if node.get("type") == "Metaspace":
        return True
    if node.get("type") == "Replace" and node.get("content") == U2581:
        return True
    children = [*(node.get("normalizers") or ()), *(node.get("pretokenizers") or ())]
    return any(_spaces_as_u2581(child) for child in children)


class PlainEncoder:
    """Payload text → ids, never an added token's id; `encode` raises `InjectionError` if the
    result holds one all the same."""

    def __init__(
        self,
        backend: Any,
        forbidden: frozenset[int],
        vocab_size: int,
        names: dict[int, str],
        roles: tuple[AddedRole, ...] = (),
        data: dict[str, Any] | None = None,
    ) -> None:
        self._backend = backend
        self.forbidden = forbidden
        self.vocab_size = vocab_size
        self._names = names
        #: each added token's role (markup or content) and why (`added.classify`)
        self.roles = roles
        #: what a literal `▁` becomes: "bytes" (round-trips), "space" (it doesn't), or None
        #: on a vocabulary that doesn't read spaces as `▁`
        self.literal_u2581: Literal["bytes", "space"] | None = None
        self._u2581_ids: list[int] = []
        self._stand_in: tuple[str, list[int]] | None = None
        self._chars: frozenset[str] | None = None
        # tokenizers gives kept added tokens the next free ids when the ids left out leave a
        # gap (a markup token before a content one): the private ids map back to the real ones
        self._to_full: dict[int, int] = {}
        for role in roles:
            private = backend.token_to_id(role.text) if role.role == "content" else None
            if private is not None and private != role.id:
                self._to_full[int(private)] = role.id
        self._to_private = {full: private for private, full in self._to_full.items()}
        # `data`: the private backend's JSON when the caller has it (one parse, not two)
        self._learn_u2581(json.loads(backend.to_str()) if data is None else data)

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: Any,
        ids: TokenIds | None,
        *,
        allow_unknown: bool = True,
        content: Collection[str] = (),
        markup: Collection[str] = (),
    ) -> PlainEncoder:
        """From an HF fast tokenizer or a `tokenizers.Tokenizer`, with the SMI block `ids`
        (None: a tokenizer without SMI tokens, e.g. for an audit); `content`/`markup`: added
        token texts the caller names one or the other (`added.classify`). The tokenizer is not
        changed; later changes to it are not seen (build a new encoder)."""
        full = backend_of(tokenizer)
        roles = classify(full, content=content, markup=markup)
        kept = {r.id for r in roles if r.role == "content"}
        forbidden = {r.id for r in roles if r.role == "markup"}
        forbidden.update(i for i in getattr(tokenizer, "all_special_ids", ()) if i not in kept)
        if ids is not None:
            forbidden.update(ids.all)
        data = json.loads(full.to_str())
        if allow_unknown:
            unk = _unknown_id(full, data.get("model") or {})
            if unk is not None and (ids is None or unk not in ids.all):
                forbidden.discard(unk)
        backend = plain_backend(tokenizer, data, kept)
        size = max(full.get_vocab_size(with_added_tokens=True), max(forbidden, default=-1) + 1)
        names = {i: full.id_to_token(i) for i in forbidden}
        return cls(backend, frozenset(forbidden), size, names, roles, data)

    def _learn_u2581(self, data: dict[str, Any]) -> None:
        """Set `literal_u2581` (module docstring) from the private backend's JSON."""
        if not (
            _spaces_as_u2581(data.get("normalizer")) or _spaces_as_u2581(data.get("pre_tokenizer"))
        ):
            return
        self.literal_u2581 = "space"
        model = data.get("model") or {}
        byte_ids = [self._backend.token_to_id(f"<0x{b:02X}>") for b in _U2581_BYTES]
        if not model.get("byte_fallback") or None in byte_ids:
            return
        if self._backend.decode(byte_ids, skip_special_tokens=False) != U2581:
            return  # the decoder doesn't read byte tokens as bytes
        self._u2581_ids = [int(i) for i in byte_ids]
        self.literal_u2581 = "bytes"

    def _stand_in_for(self, text: str) -> tuple[str, list[int]]:
        """A private-use character in neither `text` nor any vocabulary token, and the byte
        ids byte fallback spells it with."""
        if self._stand_in is not None and self._stand_in[0] not in text:
            return self._stand_in
        if self._chars is None:
            self._chars = frozenset("".join(self._backend.get_vocab(with_added_tokens=True)))
        for code in range(0xE000, 0xF900):
            char = chr(code)
            if char in text or char in self._chars:
                continue
            spelt = [self._backend.token_to_id(f"<0x{b:02X}>") for b in char.encode("utf-8")]
            if None not in spelt:
                self._stand_in = (char, [int(i) for i in spelt])
                return self._stand_in
        raise ValueError("no private-use character is free to stand in for a literal ▁")

    def _raw(self, text: str) -> list[int]:
        if self.literal_u2581 != "bytes" or U2581 not in text:
            ids: list[int] = self._backend.encode(text, add_special_tokens=False).ids
            return [self._to_full.get(i, i) for i in ids] if self._to_full else ids
        char, spelt = self._stand_in_for(text)
        ids = list(self._backend.encode(text.replace(U2581, char), add_special_tokens=False).ids)
        ids = [self._to_full.get(i, i) for i in ids]
        out: list[int] = []
        n, width = 0, len(spelt)
        while n < len(ids):
            if ids[n : n + width] == spelt:
                out.extend(self._u2581_ids)
                n += width
            else:
                out.append(ids[n])
                n += 1
        return out

    def encode(self, text: str, what: str = "payload") -> list[int]:
        """The ids of `text` as plain text; `what` names it in an `InjectionError`."""
        ids = self._raw(text)
        check_ids(ids, self.forbidden, what, self._names)
        return ids

    def encode_batch(self, texts: Sequence[str], what: str = "payload") -> list[list[int]]:
        """`encode` for many texts at once (the backend's parallel batch path)."""
        out: list[list[int]] = [
            e.ids for e in self._backend.encode_batch_fast(list(texts), add_special_tokens=False)
        ]
        if self._to_full:
            out = [[self._to_full.get(i, i) for i in ids] for ids in out]
        if self.literal_u2581 == "bytes":
            for n, text in enumerate(texts):
                if U2581 in text:
                    out[n] = self._raw(text)
        for n, ids in enumerate(out):
            check_ids(ids, self.forbidden, f"{what} {n}", self._names)
        return out

    def check(self, ids: Sequence[int], what: str) -> None:
        """Raise `InjectionError` naming `what` if `ids` hold a forbidden id."""
        check_ids(ids, self.forbidden, what, self._names)

    def decode(self, ids: Sequence[int]) -> str:
        """Plain text of payload ids (forbidden ids have no text in the private backend)."""
        private = [self._to_private.get(i, i) for i in ids]
        return str(self._backend.decode(private, skip_special_tokens=False))


def _unknown_id(backend: Any, model: dict[str, Any]) -> int | None:
    """The model's unknown-token id: `unk_token` (BPE, WordPiece, WordLevel) or `unk_id`
    (Unigram)."""
    if isinstance(model.get("unk_id"), int):
        return int(model["unk_id"])
    unk = model.get("unk_token")
    if not isinstance(unk, str):
        return None
    found = backend.token_to_id(unk)
    return int(found) if found is not None else None
