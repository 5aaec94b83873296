"""A linear-time encoder for the RWKV "world" vocabulary, with the SMI block after it.

The vocabulary ships in the `rwkv` wheel as `rwkv/rwkv_vocab_v20230424.txt`: one token a line,
`<id> <Python str or bytes literal> <byte length>`, ids 1..65529. It is read without `eval`
(`ast.literal_eval` of the literal, with a fast path for a plain quoted string with no escapes,
which is the same value), each token's byte length is checked, and the parse is cached per path
(`load_vocab`, an `lru_cache`): the first load takes well under a second, the `rwkv` package's
own `TRIE_TOKENIZER` takes ~2.6 s because it `eval`s every line.

Encoding is greedy longest match on the UTF-8 bytes, as `rwkv.rwkv_tokenizer.TRIE_TOKENIZER`
does (the same ids: a parity test holds us to it), walking a byte trie of nested dicts
(`node[byte]` → child node, `node[END]` → the id of the token ending there; ~116k nodes, ~1.5x
faster than the `rwkv` trie's nodes of 256-slot lists and a fraction of their memory): at most
128 steps (the longest token) per token emitted, so time is linear in the input. Every single
byte is a token (ids 1..256), so every input encodes. The HF WordPiece rendering of the same
vocabulary gives the same ids but is roughly cubic on long words (notes: 68.9 s for 16k
characters), which is why this exists.

Ids: 0 is the world vocabulary's end-of-text (not in the file; no bytes encode to it), 65529
the last vocabulary id, and the SMI block defaults to 65530..65561 (`TokenIds.contiguous(65530)`)
so a world model's embedding matrix must grow to at least 65562 rows (`vocab_size`). Both 0 and
the block are `forbidden`; since the trie holds only vocabulary bytes, no payload can reach them,
and every result is checked all the same (`added.check_ids`).

The default matches the reference implementation (aabbdev/state-model-interface, read at
a323cb9): its `install_smi_tokens` calls `tokenizer.add_special_tokens` with the ten tokens in
the seed's order on the HF rendering of this vocabulary (WordPiece over the same 65,529 byte
strings, id 0 its end-of-text: 65,530 ids), so they land at `len(tokenizer)` + slot = 65530 +
slot, exactly `TokenIds.contiguous(65530)`'s slots 0-9 (it reserves no slots 10-31; smllm's
reserve follows them, so the ten ids agree and a reference-trained model needs only its matrix
grown). A world model whose tokenizer put the block elsewhere is served with `base=`
(`smllm smi … --base N`): the block then starts at N, which must lie past the vocabulary.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tokens import TokenIds, slot_text
from .added import check_ids

__all__ = [
    "END_OF_TEXT",
    "SMI_BASE",
    "VOCAB_FILE",
    "TrieEncoder",
    "Vocab",
    "default_vocab_path",
    "load_vocab",
]

VOCAB_FILE = "rwkv_vocab_v20230424.txt"
#: the world vocabulary's end-of-text id (not in the file)
END_OF_TEXT = 0
#: where the SMI block starts: right after the last vocabulary id, 65529
SMI_BASE = 65530
#: the trie key under which a node holds the id of the token ending there (bytes are 0..255)
END = 256


def default_vocab_path() -> Path:
    """The vocabulary file inside the installed `rwkv` package."""
    spec = importlib.util.find_spec("rwkv")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the RWKV world vocabulary ({VOCAB_FILE}) comes with: pip install rwkv")
    return Path(next(iter(spec.submodule_search_locations))) / VOCAB_FILE


def _literal(text: str) -> bytes:
    """A token's literal as bytes (str literals are UTF-8): a plain quoted string with no
    escape and no inner quote is its inside; anything else goes through `ast.literal_eval`."""
    quote = text[:1]
    if quote in ("'", '"') and text[-1:] == quote and len(text) >= 2:
        inner = text[1:-1]
        if "\\" not in inner and quote not in inner:
            return inner.encode("utf-8")
    value = ast.literal_eval(text)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    raise ValueError(f"{text!r} is neither a str nor a bytes literal")


@dataclass(frozen=True)
class Vocab:
    """The parsed world vocabulary and its byte trie."""

    tokens: dict[int, bytes]
    #: the trie's root: `node[byte]` is a child node, `node[END]` the id of a token ending there
    root: dict[int, Any]

    @property
    def last_id(self) -> int:
        return max(self.tokens)


@functools.lru_cache(maxsize=4)
def load_vocab(path: str | None = None) -> Vocab:
    """Parse the vocabulary file (default: the `rwkv` package's) and build its trie; cached."""
    file = Path(path) if path is not None else default_vocab_path()
    tokens: dict[int, bytes] = {}
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line:
            continue
        first, last = line.find(" "), line.rfind(" ")
        if first <= 0 or last <= first:
            raise ValueError(f"{file}:{number}: not '<id> <literal> <length>'")
        token_id, length = int(line[:first]), int(line[last + 1 :])
        data = _literal(line[first + 1 : last])
        if len(data) != length:
            raise ValueError(f"{file}:{number}: {len(data)} bytes, the line says {length}")
        if token_id in tokens:
            raise ValueError(f"{file}:{number}: id {token_id} appears twice")
        tokens[token_id] = data
    root: dict[int, Any] = {}
    for token_id, data in tokens.items():
        node = root
        for byte in data:
            node = node.setdefault(byte, {})
        if END in node:
            raise ValueError(f"{file}: ids {node[END]} and {token_id} are the same bytes")
        node[END] = token_id
    return Vocab(tokens, root)


class TrieEncoder:
    """`PlainEncoder`'s interface over the RWKV world vocabulary (module docstring)."""

    def __init__(
        self, ids: TokenIds | None = None, path: str | None = None, *, base: int | None = None
    ) -> None:
        """`ids`: the SMI block's ids, or `base`: where a contiguous block starts (default
        `SMI_BASE`, right after the vocabulary; module docstring); not both."""
        self.vocab = load_vocab(path)
        if ids is not None and base is not None:
            raise ValueError("give the SMI ids or their base, not both")
        if ids is None:
            ids = TokenIds.contiguous(self.vocab.last_id + 1 if base is None else base)
        self.ids = ids
        clash = sorted(i for i in self.ids.ids if i in self.vocab.tokens or i <= END_OF_TEXT)
        if clash:
            raise ValueError(
                f"SMI ids {clash[0]}-{clash[-1]} are the world vocabulary's own ids (1-"
                f"{self.vocab.last_id}) or its end-of-text 0: the block must start past them"
            )
        self.forbidden: frozenset[int] = self.ids.all | {END_OF_TEXT}
        self.vocab_size = max(self.vocab.last_id, *self.ids.ids) + 1
        self._slot = {token_id: slot for slot, token_id in enumerate(self.ids.ids)}
        self._names = {i: slot_text(slot) for i, slot in self._slot.items()}
        self._names[END_OF_TEXT] = "end-of-text"

    def encode_bytes(self, data: bytes) -> list[int]:
        """Greedy longest match over `data` (no check: `encode` checks)."""
        root = self.vocab.root
        out: list[int] = []
        append = out.append
        size = len(data)
        start = 0
        while start < size:
            node: Any = root
            pos, best, best_end = start, -1, start
            while pos < size:
                node = node.get(data[pos])
                if node is None:
                    break
                pos += 1
                found = node.get(END)
                if found is not None:
                    best, best_end = found, pos
            if best < 0:  # only a vocabulary lacking a single byte gets here
                raise ValueError(f"byte {data[start]:#04x} at {start} has no token")
            append(best)
            start = best_end
        return out

    def encode(self, text: str, what: str = "payload") -> list[int]:
        """The ids of `text` (UTF-8) as plain text; `what` names it in an `InjectionError`."""
        ids = self.encode_bytes(text.encode("utf-8"))
        check_ids(ids, self.forbidden, what, self._names)
        return ids

    def encode_batch(self, texts: Sequence[str], what: str = "payload") -> list[list[int]]:
        return [self.encode(text, f"{what} {n}") for n, text in enumerate(texts)]

    def check(self, ids: Sequence[int], what: str) -> None:
        """Raise `InjectionError` naming `what` if `ids` hold a forbidden id."""
        check_ids(ids, self.forbidden, what, self._names)

    def token_bytes(self, token_id: int) -> bytes:
        """A token's bytes: vocabulary bytes, an SMI slot's text, b"" for end-of-text."""
        data = self.vocab.tokens.get(token_id)
        if data is not None:
            return data
        if token_id in self._slot:
            return slot_text(self._slot[token_id]).encode("utf-8")
        if token_id == END_OF_TEXT:
            return b""
        raise ValueError(f"id {token_id} is not in the RWKV world vocabulary or the SMI block")

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (SMI ids as their token text); invalid UTF-8 becomes U+FFFD per bad
        sequence (the `rwkv` decoder returns one U+FFFD for the whole text instead)."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")
