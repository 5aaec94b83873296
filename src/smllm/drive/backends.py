"""The model of a run: a scripted one (`--backend scripted:FILE`, the byte vocabulary, no torch)
or a local Hugging Face model folder (`--model PATH`, read offline, its tokenizer holding the
SMI tokens), wired to the run's driver as the runtime's actions and policy."""

from __future__ import annotations

import os
import shlex
from typing import Any

from ..smi.parser import StreamParser
from ..smi.runtime import Runtime
from ..smi.stream import Reasoning
from ..smi.tokens import MODEL_SIDE, Kind, TokenIds
from .bytevocab import BYTE_IDS, ByteDecoder, ByteEncoder
from .driver import Driver
from .scripted import ScriptModel, read_script
from .start import RunUsage

__all__ = ["hf_model_runtime", "scripted_runtime"]


def scripted_runtime(path: str, driver: Driver, max_new_tokens: int) -> Runtime:
    from ..smi.compile import Compiler

    try:
        script = read_script(path)
    except ValueError as exc:
        raise RunUsage(str(exc)) from None
    encoder = ByteEncoder()
    speakable = {BYTE_IDS[kind] for kind in (*MODEL_SIDE, Kind.EOT)}

    def parser(reasoning: Reasoning | None) -> StreamParser:
        return StreamParser(BYTE_IDS, ByteDecoder(), side="model", reasoning=reasoning)

    return Runtime(
        ScriptModel(script.transmissions, path, script.pace),
        Compiler(encoder, BYTE_IDS),
        parser,
        BYTE_IDS,
        actions=driver,
        caps_policy=driver.policy,
        max_new_tokens=max_new_tokens,
        forbid=encoder.forbidden - speakable,
    )


def hf_model_runtime(
    path: str, driver: Driver, max_new_tokens: int, constrain: bool | None, sampler: Any
) -> Runtime:
    """A runtime over the model folder `path` (`config.json`, weights, a fast tokenizer with the
    SMI tokens installed: `smllm smi install`), never downloading anything."""
    if not os.path.isdir(path):
        raise RunUsage(f"--model {path}: not a folder (a local Hugging Face model folder)")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise RunUsage(
            f"--model {path}: no config.json in it, so not a Hugging Face model folder (one "
            "that save_pretrained wrote, its SMI tokens installed: smllm smi install)"
        )
    try:
        import transformers
    except ImportError:
        raise RunUsage("--model needs the smi extra: pip install 'smllm[smi]'") from None
    from ..smi.assemble import hf_runtime
    from ..smi.backends.hf import quiet_transformers

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    quiet_transformers()  # its progress bars and notes would mix into the run's own output
    tokenizer = _load(path, "tokenizer", transformers.AutoTokenizer)
    ids = _smi_ids(path, tokenizer)  # before the weights: a refusal costs no model load
    model = _load(path, "model", transformers.AutoModelForCausalLM)
    model.eval()
    _check_rows(path, model, tokenizer, ids)
    options: dict[str, Any] = {
        "actions": driver,
        "caps_policy": driver.policy,
        "max_new_tokens": max_new_tokens,
    }
    try:
        return hf_runtime(
            model,
            tokenizer,
            sampler=sampler,
            constrain=constrain,
            single_call=driver.is_event,
            **options,
        )
    except ValueError as exc:
        raise RunUsage(f"--model {path}: {exc}") from None


def _load(path: str, what: str, auto: Any) -> Any:
    """`auto.from_pretrained(path)`, offline; RunUsage where the folder doesn't hold one."""
    try:
        return auto.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # a folder that isn't a model fails in many ways (a bad JSON, a
        # config field of the wrong type, truncated weights: OSError, ValueError, TypeError,
        # safetensors' own error): each is a folder transformers can't read, never a traceback
        said = " ".join(str(exc).split())
        raise RunUsage(
            f"--model {path}: transformers can't load a {what} from it "
            f"({type(exc).__name__}: {said[:300]})"
        ) from None


def _smi_ids(path: str, tokenizer: Any) -> TokenIds:
    """The tokenizer's SMI ids; RunUsage saying how to install them where they are missing."""
    from ..smi.vocab.install import find_tokens

    try:
        return find_tokens(tokenizer)
    except ValueError as exc:
        raise RunUsage(
            f"--model {path}: {exc}; make a folder with them: smllm smi install "
            f"{shlex.quote(path)} -o NEW, then --model NEW"
        ) from None


def _check_rows(path: str, model: Any, tokenizer: Any, ids: TokenIds) -> None:
    """The model reads and writes every id of its tokenizer: tokens installed without the
    embeddings grown would fail only at the first SMI id fed, mid-run."""
    size = len(tokenizer)
    heads = (model.get_input_embeddings(), model.get_output_embeddings())
    rows = min(int(h.weight.shape[0]) for h in heads if h is not None)
    if rows < size:
        raise RunUsage(
            f"--model {path}: the model has {rows} embedding rows but its tokenizer {size} ids "
            f"(the SMI block at {ids.ids[0]}-{ids.ids[-1]}): the embeddings were not grown with "
            "the tokens; smllm smi install grows both"
        )
