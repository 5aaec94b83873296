"""Put the SMI block's 32 tokens into a tokenizer (and a model's embeddings), or find them.

`install_tokens` appends `slot_text(0)` … `slot_text(31)` as *special* added tokens with
`normalized=False` and no stripping (`lstrip`/`rstrip`/`single_word` False): a special token is
what `split_special_tokens` and `skip_special_tokens` act on, and an unnormalised one is matched
on the raw text, so a normaliser (lowercasing, NFKC) can neither break nor forge the match. No
existing id is ever reused for new text: a slot text that is already a regular vocabulary token
is an error (its id carries trained meaning), and SMI tokens already installed as added tokens
keep their ids (installing again changes nothing: idempotent). Freshly appended tokens get the
contiguous ids `base + slot`.

A tokenizer with an added token that holds an SMI token's text plus other text (`<|eot|>\n`,
`x<|act|>`) is refused: the full tokenizer would match it instead of the SMI token, so the text
a template renders and the ids the compiler gives would disagree (the audit flags it too).

Every token is verified after installing: on a private copy of the backend (never touching the
caller's `encode_special_tokens` flag, which transformers flips for `split_special_tokens`), the
token's text encodes to exactly its one id.

Sequence tokens (`sequence_tokens=True`): smllm's choice is to make the block's own `<|bos|>` /
`<|eos|>` (slots 10 and 11) the tokenizer's `bos_token`/`eos_token` (and the model's
`config`/`generation_config` `bos_token_id`/`eos_token_id` when a model is given), so a stack that
needs BOS/EOS uses ids inside the reserved block and every other id stays the same. Whether the
tokenizer adds them around an encoding (`add_bos_token`, its post-processor) is left as it was
(the fixtures add nothing). Default off: the seed needs neither, and a fresh state, not a BOS, is
the sequence boundary.

With a model, the input embedding matrix grows to `max(current_rows, len(tokenizer))` rows: a
matrix padded beyond the tokenizer (a multiple of 64 or 128 is common) is never shrunk, and the
SMI ids may then land on padding rows. The rows of the ids this call appended (whether the matrix
grew to hold them or they were padding) and any rows the resize created are set to the mean of
the rows of the tokenizer's earlier ids, in the input embeddings and in the output embeddings when
they are not tied to them (a bias too); no other row changes, so installing into a trained model
keeps every trained row. `config.vocab_size` equals the row count afterwards.
"""

from __future__ import annotations

from typing import Any

from ..tokens import BLOCK_SIZE, BOS, EOS, TokenIds, slot_text
from .added import smi_text_held
from .backend import backend_of

__all__ = ["backend_of", "find_tokens", "install_tokens", "refuse_smi_text_holders"]


def refuse_smi_text_holders(backend: Any) -> None:
    """ValueError naming the first added token that holds an SMI token's text plus other text
    (module docstring)."""
    for token_id, token in sorted(backend.get_added_tokens_decoder().items()):
        text = str(token.content)
        inside = smi_text_held(text)
        if inside is not None:
            raise ValueError(
                f"the added token {text!r} (id {token_id}) holds the SMI token text {inside} "
                f"plus other text: the tokenizer would match it instead of {inside}; remove it "
                "from the tokenizer before installing the SMI tokens"
            )


def _added_by_text(backend: Any) -> dict[str, tuple[int, Any]]:
    """Added tokens by text: (id, AddedToken)."""
    return {tok.content: (i, tok) for i, tok in backend.get_added_tokens_decoder().items()}


def _odd_settings(token: Any) -> list[str]:
    """Why an existing added token can't serve as an SMI token (empty when it can)."""
    odd = []
    if not token.special:
        odd.append("not special")
    if token.normalized:
        odd.append("normalized=True")
    for name in ("lstrip", "rstrip", "single_word"):
        if getattr(token, name):
            odd.append(f"{name}=True")
    return odd


def _find(backend: Any) -> tuple[dict[int, int], list[str]]:
    """Installed slots (slot → id) and the slot texts that are missing; raises for a slot text
    that is a regular vocabulary token or an added token with the wrong settings."""
    added = _added_by_text(backend)
    regular = backend.get_vocab(with_added_tokens=False)
    found: dict[int, int] = {}
    missing: list[str] = []
    for slot in range(BLOCK_SIZE):
        text = slot_text(slot)
        if text in added:
            token_id, token = added[text]
            odd = _odd_settings(token)
            if odd:
                raise ValueError(
                    f"{text} is already an added token (id {token_id}) but {', '.join(odd)}: "
                    "an SMI token must be special, normalized=False, with no stripping"
                )
            found[slot] = token_id
        elif text in regular:
            raise ValueError(
                f"{text} is already a regular vocabulary token (id {regular[text]}): installing "
                "would give trained text a structural meaning; use a tokenizer without it"
            )
        else:
            missing.append(text)
    return found, missing


def find_tokens(tokenizer: Any) -> TokenIds:
    """The installed SMI ids of `tokenizer`; ValueError naming the slot texts that are missing."""
    found, missing = _find(backend_of(tokenizer))
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ValueError(f"the SMI tokens are not installed: {shown} missing (install_tokens)")
    return TokenIds(tuple(found[slot] for slot in range(BLOCK_SIZE)))


def _verify(backend: Any, ids: TokenIds) -> None:
    """Each token's text encodes to exactly its id, with added tokens recognised, on a private
    copy (the caller's backend flags stay as they are) that neither truncates nor pads (a
    sentence-transformers tokenizer.json pads every encoding to a fixed length)."""
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    copy.encode_special_tokens = False
    copy.no_truncation()
    copy.no_padding()
    for slot in range(BLOCK_SIZE):
        got = copy.encode(slot_text(slot), add_special_tokens=False).ids
        if got != [ids[slot]]:
            raise ValueError(
                f"{slot_text(slot)} encodes to {got}, not to its one id {ids[slot]}: "
                "the tokenizer does not match it atomically"
            )


def install_tokens(tokenizer: Any, model: Any = None, *, sequence_tokens: bool = False) -> TokenIds:
    """Append the 32 SMI tokens to `tokenizer` (idempotent) and, with `model`, grow and
    initialise its embeddings (module docstring). Returns their ids."""
    from tokenizers import AddedToken

    backend = backend_of(tokenizer)
    refuse_smi_text_holders(backend)
    is_hf = backend is not tokenizer
    old_len = len(tokenizer) if is_hf else backend.get_vocab_size(with_added_tokens=True)
    found, missing = _find(backend)
    if missing:
        new = [
            AddedToken(text, special=True, normalized=False, lstrip=False, rstrip=False)
            for text in missing
        ]
        if is_hf:
            tokenizer.add_tokens(new, special_tokens=True)
        else:
            backend.add_special_tokens(new)
    found, missing = _find(backend)
    if missing:  # pragma: no cover - the library refused silently
        raise ValueError(f"the tokenizer did not take {', '.join(missing)}")
    ids = TokenIds(tuple(found[slot] for slot in range(BLOCK_SIZE)))
    _verify(backend, ids)
    appended = sorted(token_id for token_id in ids.ids if token_id >= old_len)
    if sequence_tokens:
        if not is_hf:
            raise ValueError("sequence_tokens=True needs a transformers tokenizer (bos/eos)")
        tokenizer.bos_token = slot_text(BOS)
        tokenizer.eos_token = slot_text(EOS)
    if model is not None:
        needed = max(len(tokenizer) if is_hf else backend.get_vocab_size(True), max(ids.ids) + 1)
        _grow_model(model, needed, old_len, appended)
        if sequence_tokens:
            for config in (model.config, getattr(model, "generation_config", None)):
                if config is not None:
                    config.bos_token_id = ids.bos
                    config.eos_token_id = ids.eos
    return ids


def _grow_model(model: Any, needed: int, old_len: int, appended: list[int]) -> None:
    """Resize to max(rows, needed) and set the new ids' rows to the old rows' mean."""
    import torch

    embedding = model.get_input_embeddings()
    old_rows = int(embedding.weight.shape[0])
    output = model.get_output_embeddings()
    tied = output is not None and output.weight is embedding.weight
    if needed > old_rows:
        model.resize_token_embeddings(needed, mean_resizing=False)
    embedding = model.get_input_embeddings()
    rows = int(embedding.weight.shape[0])
    targets = sorted(set(appended) | set(range(old_rows, rows)))
    keep = min(old_rows, old_len)
    if targets and keep > 0:
        index = torch.tensor(targets, dtype=torch.long)
        with torch.no_grad():
            weights = [embedding.weight]
            output = model.get_output_embeddings()
            if output is not None and not tied and output.weight is not embedding.weight:
                weights.append(output.weight)
                bias = getattr(output, "bias", None)
                if bias is not None and bias.shape[0] == rows:
                    weights.append(bias)
            for weight in weights:
                mean = weight[:keep].float().mean(dim=0)
                weight[index] = mean.to(weight.dtype)
    text_config = model.config.get_text_config()
    if getattr(text_config, "vocab_size", rows) != rows:
        text_config.vocab_size = rows
