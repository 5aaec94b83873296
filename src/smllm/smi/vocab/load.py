"""A vocabulary from what a person names on the command line: a `tokenizer.json`, a Hugging
Face tokenizer folder (read offline), or `rwkv-world` (the RWKV world vocabulary the `rwkv`
package ships, encoded by the linear trie).

Everything comes from files: nothing is downloaded (`local_files_only`), so a name that isn't
a path is an error, not a Hub lookup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..tokens import TokenIds
from .decode import VocabDecoder, decoder_for

__all__ = ["RWKV_WORLD", "Vocabulary", "check_base", "load_tokenizer", "load_vocabulary"]

#: the name of the RWKV world vocabulary
RWKV_WORLD = "rwkv-world"


@dataclass
class Vocabulary:
    """An encoder that can't produce added ids, the SMI ids, and what decodes model output.
    `tokenizer` is the HF tokenizer (None for the RWKV trie); `installed`: the SMI tokens were
    appended in memory here (`install=True`), so their ids are this run's only."""

    name: str
    encoder: Any
    ids: TokenIds
    tokenizer: Any | None
    installed: bool = False

    def decoder(self) -> VocabDecoder:
        return decoder_for(self.tokenizer if self.tokenizer is not None else self.encoder)


def check_base(spec: str, base: int | None) -> None:
    """ValueError for a `base` given with a vocabulary other than the RWKV world one."""
    if base is not None and spec != RWKV_WORLD:
        raise ValueError(
            f"{spec}: --base places the SMI block in the {RWKV_WORLD} vocabulary only; a "
            "tokenizer's SMI ids are the ones installed in it"
        )


def load_vocabulary(spec: str, *, install: bool = False, base: int | None = None) -> Vocabulary:
    """The vocabulary `spec` names; ValueError says what's wrong (missing file, not a fast
    tokenizer, no SMI tokens and no `install`). `base`: where the SMI block starts in the RWKV
    world vocabulary (trie.py; default right after it)."""
    if spec == RWKV_WORLD:
        from .trie import TrieEncoder

        trie = TrieEncoder(base=base)
        return Vocabulary(spec, trie, trie.ids, None)
    check_base(spec, base)
    tokenizer = load_tokenizer(spec)
    from .encode import PlainEncoder
    from .install import find_tokens, install_tokens

    installed = False
    try:
        ids = find_tokens(tokenizer)
    except ValueError as exc:
        if not install:
            raise ValueError(
                f"{spec}: {exc}; pass --install to append them for this run, or save a "
                "tokenizer with them (smllm.smi.vocab.install.install_tokens)"
            ) from None
        ids = install_tokens(tokenizer)
        installed = True
    encoder = PlainEncoder.from_tokenizer(tokenizer, ids)
    return Vocabulary(spec, encoder, ids, tokenizer, installed)


def load_tokenizer(spec: str) -> Any:
    """A `tokenizers.Tokenizer` for a tokenizer.json (transformers isn't needed, nor its
    seconds of import), a transformers fast tokenizer for a folder."""
    if not os.path.exists(spec):
        raise ValueError(
            f"{spec}: no such file or folder (a tokenizer.json, a tokenizer folder, or "
            f"{RWKV_WORLD}; nothing is downloaded)"
        )
    try:
        if not os.path.isdir(spec):
            from tokenizers import Tokenizer

            return Tokenizer.from_file(spec)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import transformers

        transformers.logging.set_verbosity_error()  # its notices (no torch, …) aren't ours
        tokenizer = transformers.AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except Exception as exc:  # the libraries raise many kinds; the person needs one line
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{spec}: not a tokenizer that can be read: {reason}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{spec}: a slow tokenizer; SMI needs a fast (tokenizers) one")
    return tokenizer
