"""Encode untrusted payload text so that it can never yield a structural (or any added) id.

`PlainEncoder` owns a second `tokenizers.Tokenizer` built from the tokenizer's JSON with
`added_tokens` emptied: with no added vocabulary there is nothing a payload could match, special
or not (`split_special_tokens=True` still matches *non-special* added tokens such as a base
vocabulary's `<tool_call>`, and it works by flipping a flag on the shared backend, which races
with other threads). The copy is private and never mutated, so it is thread-safe, and every
result is checked against `forbidden` all the same (defence in depth: a regular vocabulary entry
spelling a control token, reachable by merges, is caught here).

The copy differs from the tokenizer in three more ways, each so that `encode(segment)` equals the
ids the full tokenizer gives that segment inside the whole rendered string (parity):
- no post-processor (no BOS/EOS around a segment), no truncation, no padding;
- a Metaspace pre-tokenizer or decoder (also inside a Sequence) with `prepend_scheme "first"`
  becomes `"never"`: the full tokenizer prepends `▁` only to the split at offset 0 of the whole
  string, and in the SMI stream every segment follows a structural id, so it is never first
  (`"always"` prepends to every split, in both, and stays);
- the model's unknown-token id (`[UNK]`, `<unk>`) is not forbidden by default
  (`allow_unknown=True`): the model itself emits it for characters outside its vocabulary, and
  the copy has no added vocabulary that could match its text, so it carries no structure, while
  forbidding it would refuse any benign payload with, say, an emoji on a BERT vocabulary.

- the model's unknown id is read from `unk_token` (BPE, WordPiece, WordLevel) or `unk_id`
  (Unigram).

Parity holds because the full tokenizer first splits the whole string at every added token, then
normalises, pre-tokenises and models each remaining piece on its own, exactly what the copy does
to one segment. It needs what `install_tokens` guarantees: the SMI tokens are unnormalised and
strip nothing (an `lstrip`/`rstrip` token would eat the segment's framing whitespace). Tested
with no mismatch: ByteLevel BPE (with and without `add_prefix_space`, without its regex),
Metaspace BPE (`first`, `always`, `split=False`, inside a Sequence), a Llama-2-style normaliser
(`Prepend("▁")` + `Replace`, which prepends to every piece in both), Unigram with NFKC, and
BERT-style WordPiece (BertNormalizer lowercasing, Whitespace). Its limits, by construction:
- a stream must start with a structural id: with `first`, text at offset 0 of a whole string
  gets a `▁` the copy never gives (SMI streams always start with a token);
- parity is for trusted text; a payload holding an added token's text (`<|eot|>`,
  `<tool_call>`) differs on purpose: the full tokenizer gives the token, the copy plain text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..tokens import TokenIds
from .install import backend_of

__all__ = ["InjectionError", "PlainEncoder", "plain_backend"]


class InjectionError(ValueError):
    """An encoding of untrusted text holds a forbidden (structural, added or special) id."""


def _never_first(node: Any) -> None:
    """Metaspace `prepend_scheme "first"` → `"never"`, walking Sequences (in place)."""
    if isinstance(node, dict):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
            node["prepend_scheme"] = "never"
        for key in ("pretokenizers", "decoders"):
            for child in node.get(key) or ():
                _never_first(child)


def plain_backend(tokenizer: Any, data: dict[str, Any] | None = None) -> Any:
    """The private `tokenizers.Tokenizer` a `PlainEncoder` encodes with (module docstring);
    `data`: the tokenizer's JSON already parsed (it is changed)."""
    from tokenizers import Tokenizer

    if data is None:
        data = json.loads(backend_of(tokenizer).to_str())
    data["added_tokens"] = []
    data["post_processor"] = None
    data["truncation"] = None
    data["padding"] = None
    _never_first(data.get("pre_tokenizer"))
    _never_first(data.get("decoder"))
    return Tokenizer.from_str(json.dumps(data))


class PlainEncoder:
    """Payload text → ids, never an added token's id; `encode` raises `InjectionError` if the
    result holds one all the same."""

    def __init__(
        self, backend: Any, forbidden: frozenset[int], vocab_size: int, names: dict[int, str]
    ) -> None:
        self._backend = backend
        self.forbidden = forbidden
        self.vocab_size = vocab_size
        self._names = names

    @classmethod
    def from_tokenizer(
        cls, tokenizer: Any, ids: TokenIds | None, *, allow_unknown: bool = True
    ) -> PlainEncoder:
        """From an HF fast tokenizer or a `tokenizers.Tokenizer`, with the SMI block `ids`
        (None: a tokenizer without SMI tokens, e.g. for an audit). The tokenizer is not
        changed; later changes to it are not seen (build a new encoder)."""
        full = backend_of(tokenizer)
        added = full.get_added_tokens_decoder()
        forbidden = set(added)
        forbidden.update(getattr(tokenizer, "all_special_ids", ()))
        if ids is not None:
            forbidden.update(ids.all)
        data = json.loads(full.to_str())
        if allow_unknown:
            unk = _unknown_id(full, data.get("model") or {})
            if unk is not None and (ids is None or unk not in ids.all):
                forbidden.discard(unk)
        backend = plain_backend(tokenizer, data)
        size = max(full.get_vocab_size(with_added_tokens=True), max(forbidden, default=-1) + 1)
        names = {i: full.id_to_token(i) for i in forbidden}
        return cls(backend, frozenset(forbidden), size, names)

    def encode(self, text: str, what: str = "payload") -> list[int]:
        """The ids of `text` as plain text; `what` names it in an `InjectionError`."""
        ids: list[int] = self._backend.encode(text, add_special_tokens=False).ids
        self.check(ids, what)
        return ids

    def encode_batch(self, texts: Sequence[str], what: str = "payload") -> list[list[int]]:
        """`encode` for many texts at once (the backend's parallel batch path)."""
        out: list[list[int]] = [
            e.ids for e in self._backend.encode_batch_fast(list(texts), add_special_tokens=False)
        ]
        for n, ids in enumerate(out):
            self.check(ids, f"{what} {n}")
        return out

    def check(self, ids: Sequence[int], what: str) -> None:
        """Raise `InjectionError` naming `what` if `ids` hold a forbidden id."""
        if self.forbidden.isdisjoint(ids):
            return
        at = next(n for n, i in enumerate(ids) if i in self.forbidden)
        raise InjectionError(
            f"{what} encoded to a forbidden id {ids[at]} ({self._names.get(ids[at])!r}) at "
            f"position {at}: untrusted text must never yield a structural or added token"
        )

    def decode(self, ids: Sequence[int]) -> str:
        """Plain text of payload ids (forbidden ids have no text in the private backend)."""
        return str(self._backend.decode(list(ids), skip_special_tokens=False))


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
