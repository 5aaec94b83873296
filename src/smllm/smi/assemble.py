"""One call from a Hugging Face model and tokenizer to a ready `Runtime`: the parts a serving
person would otherwise wire by hand (the SMI ids, the plain encoder, the compiler, a model-side
parser per turn, the backend, and the ids a model may never generate)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from .backends import GREEDY, Sampler
from .budget import Characters
from .compile import Compiler
from .constrain import Constrainer, TokenTooLong, available
from .parser import StreamParser
from .runtime import Runtime
from .stream import Reasoning
from .tokens import MODEL_SIDE, Kind, TokenIds
from .vocab.decode import decoder_for, token_bytes_of
from .vocab.encode import PlainEncoder
from .vocab.install import find_tokens, install_tokens

__all__ = ["hf_runtime"]


def hf_runtime(
    model: Any,
    tokenizer: Any,
    *,
    install: bool = False,
    sampler: Sampler = GREEDY,
    constrain: bool | None = None,
    single_call: Callable[[str], bool] | None = None,
    content: Collection[str] = (),
    markup: Collection[str] = (),
    **options: Any,
) -> Runtime:
    """A `Runtime` over `model` (any transformers causal LM: Mamba, Mamba2, RWKV-4, KV-cache
    models) and its fast `tokenizer`. The SMI tokens must be installed (`install=True` appends
    them and grows the model's embeddings: `install.install_tokens`). The model may never
    generate a runtime-side structural id, a reserved one, or any markup token of the
    tokenizer (the budget forbids the first two; `forbid` the rest); its content tokens, such
    as GPT-NeoX's whitespace runs, it may (`vocab/added.py`; `content`/`markup` name added
    token texts one or the other where the rule guesses wrong for a model). `options`
    go to `Runtime` (actions, caps_policy, max_new_tokens, action_timeout, strict, …).

    `constrain`: constrained decoding (`constrain.py`: each turn's grammar from its CAPS and
    CTRL, combined with the budget's mask). None (the default) turns it on where llguidance
    is installed, the vocabulary's tokens are bytes (not WordPiece) and none is longer than
    llguidance takes (1,024 bytes), off otherwise; False turns it off; True requires it
    (ValueError saying why it can't be). `single_call`: the tools of which the grammar lets a
    transmission call one at most, all of them together (`smllm run`: the events)."""
    from .backends.hf import HFBackend

    ids = install_tokens(tokenizer, model) if install else find_tokens(tokenizer)
    encoder = PlainEncoder.from_tokenizer(tokenizer, ids, content=content, markup=markup)
    backend = HFBackend(model)
    speakable = {ids[kind] for kind in (*MODEL_SIDE, Kind.EOT)}
    forbid = set(encoder.forbidden - speakable) | set(options.pop("forbid", ()))
    # rows of a padded embedding matrix past the tokenizer: ids nothing can decode
    forbid.update(range(encoder.vocab_size, backend.vocab_size))

    def parser(reasoning: Reasoning | None) -> StreamParser:
        return StreamParser(ids, decoder_for(tokenizer), side="model", reasoning=reasoning)

    # each id's bytes as the decoder joins them (None: WordPiece and the like), read once for
    # the budget's whole-character cut and the grammar
    token_bytes = token_bytes_of(tokenizer)
    if "characters" not in options and token_bytes is not None:
        options["characters"] = Characters(token_bytes, encoder.vocab_size)
    # constrained decoding (constrain.py): on where llguidance is installed, unless the caller
    # brings a constraint of their own
    if "constraint" not in options:
        constraint = _constraint(
            constrain, tokenizer, ids, forbid, backend.vocab_size, encoder, token_bytes, single_call
        )
        if constraint is not None:
            options["constraint"] = constraint

    return Runtime(
        backend,
        Compiler(encoder, ids),
        parser,
        ids,
        sampler=sampler,
        forbid=forbid,
        **options,
    )


def _constraint(
    constrain: bool | None,
    tokenizer: Any,
    ids: TokenIds,
    forbid: set[int],
    vocab_size: int,
    encoder: PlainEncoder,
    token_bytes: Callable[[int], bytes] | None,
    single: Callable[[str], bool] | None = None,
) -> Constrainer | None:
    """The runtime's constraint factory for `hf_runtime(constrain=…)` (its docstring)."""
    if constrain is False:
        return None
    if not available():
        if constrain:
            raise ValueError(
                "constrain=True needs llguidance, which is not installed: "
                "pip install 'smllm[smi]' (or pass constrain=False)"
            )
        return None
    if constrain is None and token_bytes is None:
        return None  # WordPiece and the like: token bytes don't add up to the text
    try:
        return Constrainer.for_hf(
            tokenizer,
            ids,
            forbid,
            vocab_size,
            encoder=encoder,
            token_bytes=token_bytes,
            single=single,
        )
    except TokenTooLong:
        if constrain:
            raise
        return None  # as for WordPiece: off where it can't be, an error only when asked for
