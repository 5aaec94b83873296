"""The model of a run: a scripted one (`--backend scripted:FILE`, the byte vocabulary, no torch)
or a local Hugging Face model folder (`--model PATH`, read offline, its tokenizer holding the
SMI tokens), wired to the run's driver as the runtime's actions and policy."""

from __future__ import annotations

import os
from typing import Any

from ..smi.parser import StreamParser
from ..smi.runtime import Runtime
from ..smi.stream import Reasoning
from ..smi.tokens import MODEL_SIDE, Kind
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
    try:
        import transformers
    except ImportError:
        raise RunUsage("--model needs the smi extra: pip install 'smllm[smi]'") from None
    from ..smi.assemble import hf_runtime

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise RunUsage(f"--model {path}: {exc}") from None
    model.eval()
    options: dict[str, Any] = {
        "actions": driver,
        "caps_policy": driver.policy,
        "max_new_tokens": max_new_tokens,
    }
    try:
        return hf_runtime(model, tokenizer, sampler=sampler, constrain=constrain, **options)
    except ValueError as exc:
        raise RunUsage(f"--model {path}: {exc}") from None
