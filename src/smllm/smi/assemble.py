"""One call from a Hugging Face model and tokenizer to a ready `Runtime`: the parts a serving
person would otherwise wire by hand (the SMI ids, the plain encoder, the compiler, a model-side
parser per turn, the backend, and the ids a model may never generate)."""

from __future__ import annotations

from typing import Any

from .backends import GREEDY, Sampler
from .compile import Compiler
from .parser import StreamParser
from .runtime import Runtime
from .stream import Reasoning
from .tokens import MODEL_SIDE, Kind
from .vocab.decode import decoder_for
from .vocab.encode import PlainEncoder
from .vocab.install import find_tokens, install_tokens

__all__ = ["hf_runtime"]


def hf_runtime(
    model: Any,
    tokenizer: Any,
    *,
    install: bool = False,
    sampler: Sampler = GREEDY,
    **options: Any,
) -> Runtime:
    """A `Runtime` over `model` (any transformers causal LM: Mamba, Mamba2, RWKV-4, KV-cache
    models) and its fast `tokenizer`. The SMI tokens must be installed (`install=True` appends
    them and grows the model's embeddings: `install.install_tokens`). The model may never
    generate a runtime-side structural id, a reserved one, or any other added or special
    token of the tokenizer (the budget forbids the first two; `forbid` the rest). `options`
    go to `Runtime` (actions, caps_policy, max_new_tokens, action_timeout, strict, …)."""
    from .backends.hf import HFBackend

    ids = install_tokens(tokenizer, model) if install else find_tokens(tokenizer)
    encoder = PlainEncoder.from_tokenizer(tokenizer, ids)
    backend = HFBackend(model)
    speakable = {ids[kind] for kind in (*MODEL_SIDE, Kind.EOT)}
    forbid = set(encoder.forbidden - speakable) | set(options.pop("forbid", ()))
    # rows of a padded embedding matrix past the tokenizer: ids nothing can decode
    forbid.update(range(encoder.vocab_size, backend.vocab_size))

    def parser(reasoning: Reasoning | None) -> StreamParser:
        return StreamParser(ids, decoder_for(tokenizer), side="model", reasoning=reasoning)

    return Runtime(
        backend,
        Compiler(encoder, ids),
        parser,
        ids,
        sampler=sampler,
        forbid=forbid,
        **options,
    )
