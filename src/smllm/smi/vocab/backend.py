"""The `tokenizers.Tokenizer` behind what a caller hands the tokenizer wing, and the one rewrite
of its JSON that every private copy needs.

- `backend_of`: an HF fast tokenizer's backend, or a `tokenizers.Tokenizer` itself; anything
  else is a TypeError naming it (a slow tokenizer has no backend SMI can copy).
- `never_first`: Metaspace `prepend_scheme "first"` → `"never"` in a pre-tokenizer's or a
  decoder's JSON, walking Sequences. The full tokenizer prepends `▁` only to the split at offset
  0 of a whole string; in an SMI stream every payload segment follows a structural id or a token
  run, so it is never first: the plain encoder encodes with "never" and the piece decoder
  decodes with it (`"always"` prepends to every split when encoding, and its decoder rightly
  strips one, so it stays).
"""

from __future__ import annotations

from typing import Any

__all__ = ["backend_of", "never_first"]


def backend_of(tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` behind `tokenizer` (an HF fast tokenizer, or one itself)."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer):
        return backend
    raise TypeError(
        f"{type(tokenizer).__name__} is not a fast tokenizer: SMI needs a "
        "transformers PreTrainedTokenizerFast or a tokenizers.Tokenizer"
    )


def never_first(node: Any) -> bool:
    """Rewrite every Metaspace `"first"` in `node` (a pre-tokenizer's or decoder's JSON, in
    place) to `"never"`; True when something changed."""
    changed = False
    if isinstance(node, dict):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
            node["prepend_scheme"] = "never"
            changed = True
        for key in ("pretokenizers", "decoders"):
            for child in node.get(key) or ():
                changed = never_first(child) or changed
    return changed
