"""Which added tokens can untrusted text reach, and through which encode calls?

`audit(tokenizer)` puts each added token's text (the SMI tokens, a base vocabulary's specials,
non-special extras such as `<tool_call>`) into a payload and encodes it through the paths code
commonly uses for "plain" text, recording where the token's id comes out:

- `default`: `tokenizer(payload)` (transformers);
- `add_special_tokens=False`: `tokenizer(payload, add_special_tokens=False)`;
- `split_special_tokens=True`: the same with `split_special_tokens=True` (still matches every
  non-special added token; run on a deep copy, since transformers implements it by flipping
  `encode_special_tokens` on the shared backend and leaves it flipped);
- `backend`: `tokenizers.Tokenizer.encode(payload)` on the backend;
- for a bare `tokenizers.Tokenizer`: `backend` and `encode_special_tokens=True` (on a copy).

Then it proves the safe path: `PlainEncoder` over the same payloads (and every SMI slot's text,
installed or not, in several spellings) must give no forbidden id; anything else is listed in
`plain_encoder_leaks`, which must be empty. The payload variants wrap the text bare, glued
(`a<t>b`), spaced (`a <t> b`) and upper-cased, so tokens with `lstrip`/`rstrip`/`single_word`
and normalised tokens under a lowercasing normaliser (`<TOOL_CALL>` on BERT) are caught too.

Each added token also gets its role, markup or content, and why (`added.classify`); a token that
holds an SMI token's text plus other text is listed in `unsafe_tokens`. A tokenizer without the
SMI tokens is audited as it is, and `would_install` gives the 32 texts and the ids installing
would give them (found by installing into a copy), or `install_refusal` says why it can't. On a
`▁` vocabulary, `literal_u2581` says what a literal `▁` in a payload becomes (encode.py).
`audit_trie` audits the RWKV world trie (no added vocabulary: only the plain-encoder proof).
A report is `safe` when the plain encoder leaks nothing and no added token is unsafe.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..stream import InjectionError
from ..tokens import BLOCK_SIZE, TokenIds, slot_text
from .backend import backend_of
from .encode import PlainEncoder
from .install import find_tokens, install_tokens

__all__ = ["AddedTokenAudit", "AuditReport", "audit", "audit_trie"]

HF_PATHS = ("default", "add_special_tokens=False", "split_special_tokens=True", "backend")
RAW_PATHS = ("backend", "encode_special_tokens=True")


def _variants(text: str) -> tuple[str, ...]:
    return (text, f"a{text}b", f"a {text} b", f"{text}\n{text}", text.upper())


@dataclass(frozen=True)
class AddedTokenAudit:
    """One added token and the naive paths that produce its id from a payload with its text."""

    id: int
    text: str
    special: bool
    normalized: bool
    smi: bool
    leaks_through: tuple[str, ...]
    #: "markup" (forbidden to payloads) or "content" (payload text), and why
    role: str = "markup"
    reason: str = ""
    #: why no tokenizer should hold it (it holds an SMI token's text plus other text)
    unsafe: str | None = None


@dataclass(frozen=True)
class AuditReport:
    tokenizer: str
    vocab_size: int
    #: the SMI block's ids, or None when the tokens are not installed
    smi_ids: tuple[int, ...] | None
    #: the naive paths tried (HF or bare-backend ones)
    paths: tuple[str, ...]
    added: tuple[AddedTokenAudit, ...]
    #: payloads the PlainEncoder turned into a forbidden id (must be empty)
    plain_encoder_leaks: tuple[str, ...]
    #: without SMI tokens: (text, id) for each slot as installing would add them
    would_install: tuple[tuple[str, int], ...] | None = None
    #: without SMI tokens: why installing would be refused (None when it wouldn't)
    install_refusal: str | None = None
    #: what a literal ▁ in a payload becomes on a ▁ vocabulary: "bytes" or "space"; None
    #: elsewhere (encode.py)
    literal_u2581: str | None = None

    def leaking(self, path: str) -> tuple[AddedTokenAudit, ...]:
        """The added tokens a payload reaches through `path`."""
        if path not in self.paths:
            raise ValueError(f"{path!r} is not one of the audited paths {self.paths}")
        return tuple(t for t in self.added if path in t.leaks_through)

    @property
    def unsafe_tokens(self) -> tuple[AddedTokenAudit, ...]:
        """Added tokens no tokenizer should hold (they hold an SMI token's text plus more)."""
        return tuple(t for t in self.added if t.unsafe is not None)

    @property
    def safe(self) -> bool:
        return not self.plain_encoder_leaks and not self.unsafe_tokens

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "safe": self.safe}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)


def _hf_paths(tokenizer: Any) -> dict[str, Callable[[str], list[int]]]:
    splitting = copy.deepcopy(tokenizer)
    backend = backend_of(tokenizer)

    def default(text: str) -> list[int]:
        return list(tokenizer(text).input_ids)

    def no_specials(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False).input_ids)

    def split(text: str) -> list[int]:
        ids = splitting(text, add_special_tokens=False, split_special_tokens=True).input_ids
        return list(ids)

    def raw(text: str) -> list[int]:
        return list(backend.encode(text).ids)

    return dict(zip(HF_PATHS, (default, no_specials, split, raw), strict=True))


def _raw_paths(backend: Any) -> dict[str, Callable[[str], list[int]]]:
    from tokenizers import Tokenizer

    splitting = Tokenizer.from_str(backend.to_str())
    splitting.encode_special_tokens = True

    def raw(text: str) -> list[int]:
        return list(backend.encode(text).ids)

    def split(text: str) -> list[int]:
        return list(splitting.encode(text).ids)

    return dict(zip(RAW_PATHS, (raw, split), strict=True))


def _smi_ids(tokenizer: Any) -> TokenIds | None:
    try:
        return find_tokens(tokenizer)
    except ValueError:
        return None


def _would_install(
    tokenizer: Any, backend: Any
) -> tuple[tuple[tuple[str, int], ...] | None, str | None]:
    """(text, id) per slot as installing into a copy gives them, or why it is refused."""
    from tokenizers import Tokenizer

    target = (
        Tokenizer.from_str(backend.to_str()) if backend is tokenizer else copy.deepcopy(tokenizer)
    )
    try:
        ids = install_tokens(target)
    except ValueError as exc:
        return None, str(exc)
    return tuple((slot_text(slot), ids[slot]) for slot in range(BLOCK_SIZE)), None


def _leaks(encoder: Any, payloads: list[str]) -> tuple[str, ...]:
    """The refusals of `encoder` over `payloads` (each an `InjectionError`'s message)."""
    leaks: list[str] = []
    for payload in payloads:
        try:
            encoder.encode(payload, what=repr(payload))
        except InjectionError as exc:
            leaks.append(str(exc))
    return tuple(leaks)


def _slot_payloads() -> list[str]:
    payloads: list[str] = []
    for slot in range(BLOCK_SIZE):
        text = slot_text(slot)
        payloads.extend((*_variants(text), text.title(), text[:3] + "\u200b" + text[3:]))
    return payloads


def audit(tokenizer: Any) -> AuditReport:
    """Audit `tokenizer` (an HF fast tokenizer or a `tokenizers.Tokenizer`, with or without the
    SMI tokens); it is not changed."""
    backend = backend_of(tokenizer)
    is_hf = backend is not tokenizer
    paths = _hf_paths(tokenizer) if is_hf else _raw_paths(backend)
    ids = _smi_ids(tokenizer)
    smi = ids.all if ids is not None else frozenset()
    encoder = PlainEncoder.from_tokenizer(tokenizer, ids)
    roles = {r.id: r for r in encoder.roles}
    rows: list[AddedTokenAudit] = []
    payloads: list[str] = []
    for token_id, token in sorted(backend.get_added_tokens_decoder().items()):
        variants = _variants(token.content)
        payloads.extend(variants)
        reached = tuple(
            name for name, run in paths.items() if any(token_id in run(v) for v in variants)
        )
        role = roles[token_id]
        rows.append(
            AddedTokenAudit(
                token_id,
                token.content,
                token.special,
                token.normalized,
                token_id in smi,
                reached,
                role.role,
                role.reason,
                role.unsafe,
            )
        )
    would, refusal = _would_install(tokenizer, backend) if ids is None else (None, None)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    size = len(tokenizer) if is_hf else backend.get_vocab_size(with_added_tokens=True)
    return AuditReport(
        tokenizer=str(name),
        vocab_size=int(size),
        smi_ids=ids.ids if ids is not None else None,
        paths=tuple(paths),
        added=tuple(rows),
        plain_encoder_leaks=_leaks(encoder, payloads + _slot_payloads()),
        would_install=would,
        install_refusal=refusal,
        literal_u2581=encoder.literal_u2581,
    )


def audit_trie(trie: Any) -> AuditReport:
    """Audit a trie vocabulary (`trie.TrieEncoder`): it has no added tokens and no naive path,
    so the report is the plain-encoder proof over every SMI slot's text."""
    return AuditReport(
        tokenizer="rwkv-world",
        vocab_size=int(trie.vocab_size),
        smi_ids=trie.ids.ids,
        paths=(),
        added=(),
        plain_encoder_leaks=_leaks(trie, _slot_payloads()),
    )
