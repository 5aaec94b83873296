"""Tiny random model folders for `smllm run --model` (tests/smi/test_run_models.py): a Mamba or
a GPT-2 (hidden 32, 2 layers, random weights) and the conftest's ByteLevel BPE tokenizer with the
SMI block, saved with `save_pretrained` the way `smllm smi install` leaves a folder, so the run
loads them offline with `AutoTokenizer` / `AutoModelForCausalLM`.

A random model can't drive a machine for 20 turns: it stops without an ACT (the engine blocks,
then ends the run as a runaway) or fires `pause`/`yield` at once (tests/smi/test_run_models.py
checks those endings too). So the 20-turn models *lean*: one hidden channel is made constant
(GPT-2: `ln_f` weight 0 and bias 1 on channel 0; Mamba: embedding column 0 a constant that
dominates the RMS norm, `norm_f` scaling it back to 1) and the untied output head's column 0
holds `leanings()`, a fixed logit per id, so the logits are those leanings plus the random
model's own small noise (about 0.1). It is the random model behind a fixed logits processor, in its
weights, so the real CLI loads it like any model. Sampled (`--temperature 1 --seed N`), it:

- opens THINK or ACT about equally (OUT almost never), so every think mode is exercised;
- fills any payload with `p` and `l` (leaning +20 against +5 for other text), so a THINK goes on
  until the budget cuts it and then, by the budget's rule, only ACT or OUT may follow;
- under constrained decoding names `planned` (the decision ids are `p` then `l`) with a 32-char
  id of p and l (unique in a session), and ends with `<|eot|>` (+12) after the ACT: the event is
  accepted every turn, its guard false, PLAN re-entered, so the run goes on to --max-turns;
- without constrained decoding writes ACT text that is no JSON and never ends before
  --max-new-tokens: each ACT is refused with an error OBS, which is no stop, so it goes on too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from helpers.smi_runtime import tiny_model
from smi.conftest import build_installed, build_tokenizer

from smllm.smi.tokens import Kind, TokenIds

FAMILIES = ("mamba", "gpt2")
#: the event a leaning model fires (its name's first two letters are its only choices)
LEANS_TO = "planned"
#: a KV model's positions: 20 turns feed ~7,500 ids
POSITIONS = 16384
HIDDEN = 32

#: leanings, in logits
TEXT, FAVOURED, THINK, ACT, OUT, EOT, NEVER = 5.0, 20.0, 3.0, 3.0, -10.0, 12.0, -30.0


def leanings(tokenizer: Any, ids: TokenIds) -> torch.Tensor:
    """A logit per id of `tokenizer` (module docstring): the ids spelling a start of `planned`
    or of `lanned` are favoured, other text plain, the model-side block ids as said, the
    runtime-side ones never (the budget forbids them anyway)."""
    size = len(tokenizer)
    out = torch.full((size,), TEXT)
    smi = set(ids.all)
    for i in range(size):
        if i in smi:
            out[i] = NEVER
            continue
        text = tokenizer.decode([i])
        if text and (LEANS_TO.startswith(text) or LEANS_TO[1:].startswith(text)):
            out[i] = FAVOURED
    for kind, value in ((Kind.THINK, THINK), (Kind.ACT, ACT), (Kind.OUT, OUT), (Kind.EOT, EOT)):
        out[ids[kind]] = value
    return out


def leaning_model(family: str, tokenizer: Any, ids: TokenIds, seed: int = 0) -> Any:
    """A tiny random model of `family` over `tokenizer` whose logits are `leanings()` plus its
    own noise (module docstring)."""
    bias = leanings(tokenizer, ids)
    model = tiny_model(family, vocab=len(tokenizer), seed=seed, positions=POSITIONS)
    model.config.tie_word_embeddings = False
    head = model.get_output_embeddings()
    with torch.no_grad():
        head.weight = torch.nn.Parameter(head.weight.detach().clone())  # untied
        if family == "gpt2":
            norm = model.transformer.ln_f
            norm.weight[0], norm.bias[0] = 0.0, 1.0  # channel 0 is 1 at every position
        elif family == "mamba":
            # channel 0 dominates the residual, so the RMS norm makes it sqrt(HIDDEN) * weight
            model.backbone.embeddings.weight[:, 0] = 20.0
            model.backbone.norm_f.weight[0] = 1 / math.sqrt(HIDDEN)
        else:
            raise ValueError(f"no leaning model of family {family!r}")
        head.weight[:, 0] = bias
    return model.eval()


def save_folder(folder: Path, family: str, *, smi: bool = True, grown: bool = True) -> Path:
    """Save a model folder of `family` in `folder`: a leaning model over the tokenizer with the
    SMI tokens; `smi=False`: a plain random model over the tokenizer without them;
    `grown=False`: the tokenizer has them but the model's embeddings stop before them."""
    if smi:
        installed = build_installed("bytelevel")
        tokenizer = installed.tokenizer
        if grown:
            model = leaning_model(family, tokenizer, installed.ids)
        else:
            model = tiny_model(family, vocab=len(tokenizer) - len(installed.ids.all))
    else:
        tokenizer = build_tokenizer("bytelevel")
        model = tiny_model(family, vocab=len(tokenizer))
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))
    model.save_pretrained(str(folder))
    return folder
