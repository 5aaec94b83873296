"""`smllm smi install MODEL -o OUT`: a model folder made ready for `smllm run --model` and
`hf_runtime` — the SMI block appended to its tokenizer, the embeddings grown to match, saved to
a new folder; real `transformers` save/load, offline."""

from __future__ import annotations

import json
from pathlib import Path

import transformers
from conftest import smllm

from smllm.smi.tokens import TOKEN_TEXT
from smllm.smi.vocab.install import find_tokens

from .conftest import build_tokenizer


def tiny_folder(folder: Path) -> int:
    """A GPT-2-shaped random model and a ByteLevel tokenizer without SMI tokens; its size."""
    tokenizer = build_tokenizer("bytelevel")
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer), n_embd=16, n_layer=1, n_head=2, n_positions=64
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def test_install_makes_a_runnable_model_folder(tmp_path: Path, env: dict[str, str]) -> None:
    size = tiny_folder(tmp_path / "base")
    ran = smllm(["smi", "install", "base", "-o", "ready", "--json"], tmp_path, env)
    assert (ran.code, ran.err) == (0, "")
    assert json.loads(ran.out) == {"output": "ready", "smi_ids": [size, size + 31], "added": 32}
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "ready")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ready")
    ids = find_tokens(tokenizer)
    assert ids.ids == tuple(range(size, size + 32))
    assert tokenizer.convert_ids_to_tokens(list(ids.ids[:10])) == list(TOKEN_TEXT)
    assert model.get_input_embeddings().weight.shape[0] >= size + 32
    # the base folder is left as it was
    assert len(transformers.AutoTokenizer.from_pretrained(tmp_path / "base")) == size

    again = smllm(["smi", "install", "ready", "-o", "again"], tmp_path, env)
    assert (again.code, again.err) == (0, "")
    assert again.out == f"wrote again: SMI ids {size}-{size + 31} (already installed)\n"


def test_install_refuses_what_it_cant_do(tmp_path: Path, env: dict[str, str]) -> None:
    tiny_folder(tmp_path / "base")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    (tmp_path / "empty").mkdir()
    cases = {
        ("nowhere", "-o", "out"): "error: nowhere: not a folder (a local Hugging Face model "
        "folder)\n",
        ("base", "-o", "taken"): "error: taken: exists and is not an empty folder; name a new "
        "one\n",
    }
    for args, message in cases.items():
        ran = smllm(["smi", "install", *args], tmp_path, env)
        assert (ran.code, ran.out, ran.err) == (2, "", message), args
    assert (tmp_path / "taken" / "x").read_text() == "mine"
    # an empty folder is fine; a folder that is no model says what the library said
    assert smllm(["smi", "install", "base", "-o", "empty"], tmp_path, env).code == 0
    ran = smllm(["smi", "install", "taken", "-o", "out2"], tmp_path, env)
    assert ran.code == 2 and ran.err.startswith("error: taken: ") and "Traceback" not in ran.err
    assert not (tmp_path / "out2").exists()
