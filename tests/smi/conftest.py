"""Shared SMI fixtures: tiny tokenizers trained in the test session (milliseconds, offline).

Four families, each a `transformers.PreTrainedTokenizerFast` around a `tokenizers.Tokenizer`
trained here on `CORPUS`, each with a decoy NON-special added token `<tool_call>` (a base
vocabulary's tool tag: `split_special_tokens=True` still matches it):

- `bytelevel`: ByteLevel BPE (GPT-2 style, `add_prefix_space=False`), lossless;
- `metaspace_first` / `metaspace_always`: SentencePiece-style BPE with a Metaspace pre-tokenizer
  and decoder, `prepend_scheme` "first" / "always" (the leading-`▁` artefacts);
- `wordpiece`: BERT-style WordPiece (BertNormalizer lowercasing, Whitespace pre-tokenizer).

Two more, built by `build_tokenizer` too but not in `FAMILIES` (so the tests parametrised over
`family` keep their four): `neox` (`build_neox`), GPT-NeoX-style ByteLevel BPE (Pythia, Mamba)
with NeoX's added tokens: `<|endoftext|>` and `<|padding|>` special, and the 23 *content*
whitespace runs (2..24 spaces, non-special, `normalized=True`) exactly as GPT-NeoX-20B's
tokenizer.json has them; and `llama` (`build_llama`), Llama-style SentencePiece BPE (Metaspace
`first` without splitting, byte fallback over `<0x00>`…`<0xFF>`, `<unk>`/`<s>`/`</s>` special).
`ALL_FAMILIES` names all six.

Training runs once per session (`_trained`); every fixture hands out a fresh tokenizer built
from the trained JSON, so a test that installs tokens never changes another test's tokenizer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import transformers
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
except ImportError as exc:  # no skips: say how to get them
    raise ImportError(
        f"the SMI tests need tokenizers and transformers ({exc}): "
        "pip install 'transformers==5.24.0' 'tokenizers==0.23.3'"
    ) from exc

FAMILIES = ("bytelevel", "metaspace_first", "metaspace_always", "wordpiece")
ALL_FAMILIES = (*FAMILIES, "neox", "llama")
DECOY = "<tool_call>"
#: GPT-NeoX-20B's content added tokens: runs of 24 down to 2 spaces, ids counting up
NEOX_SPACE_RUNS = tuple(" " * n for n in range(24, 1, -1))

#: a small varied corpus: English, code, JSON, paths, numbers, non-ASCII (é, 漢字, emoji)
CORPUS_LINES = [
    "You are a coding agent. Fix the failing authentication test.",
    "Inspect code before modifying it. Run relevant tests after changes.",
    "The timestamp comparison uses inconsistent units; seconds versus milliseconds.",
    "Pick up the red cup and place it on the tray, then say done.",
    "def add(a, b):\n    return a + b\n",
    "for i in range(10):\n    print(i, i * i)\n",
    "if (x !== null && y > 0) { return x / y; } else { throw new Error('bad'); }",
    '{"id": "a1", "type": "tool", "name": "bash", "arguments": {"command": "git status"}}',
    '{"caused_by": "a1", "ok": true, "content": "42 tests passed"}',
    '{"reasoning": {"mode": "adaptive", "effort": "medium", "max_tokens": 8192}}',
    "src/auth.ts tests/auth.test.ts README.md ~/projects/app/main.py",
    "Café crème, naïve résumé, déjà vu, élève, Ça va?",
    "漢字 と ひらがな、中文 文本，日本語のテキスト。",
    "Emoji: 🙂 👍 🎉 👩‍💻 ❤️ 🚀",
    "Numbers 0 1 2 3 4 5 6 7 8 9 3.14159 -42 1e10 0xFF 100%",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
    "Observations may return in a different order when causal identifiers are preserved.",
    "Errors are observations and require no additional structural token.",
    "    indented line\twith tab\n\nblank lines above\r\n",
    "import json\nprint(json.dumps({'a': [1, 2, 3]}, indent=2))\n",
    "SELECT name, age FROM users WHERE age >= 31 ORDER BY name;",
    '<div class="box">Hello &amp; welcome</div> <br/> a < b > c | d',
    "question? answer! (parenthesis) [brackets] {braces} 'quotes' \"double\" `tick`",
]
CORPUS = CORPUS_LINES * 3

#: indented code, so the NeoX-style vocabulary learns what its whitespace tokens sit next to
CODE_LINES = [
    "class Box:\n    def __init__(self, size):\n        self.size = size\n",
    "        if size > 2:\n            return  size\n        else:\n            pass\n",
    "x  =  1\ny   =   2\n                z = x + y\n",
]

#: words, pieces and separators to build trusted payloads from (no marker strings in them)
WORDS = sorted({w for line in CORPUS_LINES for w in line.split()})


def _train(family: str) -> str:
    """Train one family's tokenizer; returns its JSON (the decoy is added later)."""
    tok: Any
    if family == "bytelevel":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer: Any = trainers.BpeTrainer(
            vocab_size=700,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif family.startswith("metaspace_"):
        scheme = family.removeprefix("metaspace_")
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme)
        tok.decoder = decoders.Metaspace(prepend_scheme=scheme)
        trainer = trainers.BpeTrainer(
            vocab_size=600, special_tokens=["<unk>", "</s>"], show_progress=False
        )
    elif family == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.decoder = decoders.WordPiece(prefix="##")
        trainer = trainers.WordPieceTrainer(
            vocab_size=600, special_tokens=["[UNK]", "[SEP]"], show_progress=False
        )
    elif family == "neox":  # GPT-NeoX-20B: NFC, ByteLevel (no prefix space), ids 0/1 special
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=800,
            special_tokens=["<|endoftext|>", "<|padding|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif family == "llama":  # Llama (legacy=False): Metaspace "first", unsplit, byte fallback
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence(
            [
                decoders.Replace("▁", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        )
        trainer = trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))],
            show_progress=False,
        )
    else:
        raise ValueError(f"no tokenizer family {family!r}")
    tok.train_from_iterator(CORPUS + CODE_LINES * 3, trainer=trainer)
    return str(tok.to_str())


_TRAINED: dict[str, str] = {}


def _trained(family: str) -> str:
    if family not in _TRAINED:
        _TRAINED[family] = _train(family)
    return _TRAINED[family]


_SPECIALS = {
    "bytelevel": ("<|endoftext|>", "<|endoftext|>"),
    "metaspace_first": ("<unk>", "</s>"),
    "metaspace_always": ("<unk>", "</s>"),
    "wordpiece": ("[UNK]", "[SEP]"),
    "neox": ("<|endoftext|>", "<|endoftext|>"),
    "llama": ("<unk>", "</s>"),
}


def _added_like_the_family(family: str, raw: Tokenizer) -> None:
    """The added tokens the real family has on top of its trained vocabulary."""
    if family == "neox":
        # as in GPT-NeoX-20B's tokenizer.json: special: false, normalized: true, no stripping
        raw.add_tokens(
            [
                AddedToken(run, special=False, normalized=True, lstrip=False, rstrip=False)
                for run in NEOX_SPACE_RUNS
            ]
        )
    elif family == "llama":
        # Llama's byte tokens are regular vocabulary; training made them "special" added tokens
        data = json.loads(raw.to_str())
        data["added_tokens"] = [
            t for t in data["added_tokens"] if not t["content"].startswith("<0x")
        ]
        rebuilt = Tokenizer.from_str(json.dumps(data))
        raw.__setstate__(rebuilt.__getstate__())


def build_tokenizer(family: str) -> transformers.PreTrainedTokenizerFast:
    """A fresh tokenizer of `family` (trained once per session), with the decoy added."""
    raw = Tokenizer.from_str(_trained(family))
    _added_like_the_family(family, raw)
    raw.add_tokens([AddedToken(DECOY, special=False)])
    unk, eos = _SPECIALS[family]
    if family == "neox":
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=raw, unk_token=unk, eos_token=eos, pad_token="<|padding|>"
        )
    if family == "llama":
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=raw, unk_token=unk, eos_token=eos, bos_token="<s>"
        )
    return transformers.PreTrainedTokenizerFast(tokenizer_object=raw, unk_token=unk, eos_token=eos)


def build_neox() -> transformers.PreTrainedTokenizerFast:
    """A fresh GPT-NeoX-style tokenizer (module docstring), decoy added, no SMI tokens."""
    return build_tokenizer("neox")


def build_llama() -> transformers.PreTrainedTokenizerFast:
    """A fresh Llama-style tokenizer (module docstring), decoy added, no SMI tokens."""
    return build_tokenizer("llama")


class Installed(NamedTuple):
    family: str
    tokenizer: Any  # transformers.PreTrainedTokenizerFast
    ids: Any  # smllm.smi.tokens.TokenIds


def build_installed(family: str) -> Installed:
    """A fresh tokenizer of `family` with the 32 SMI tokens installed."""
    from smllm.smi.vocab.install import install_tokens

    tok = build_tokenizer(family)
    return Installed(family, tok, install_tokens(tok))


@pytest.fixture(scope="session")
def make_tokenizer() -> Callable[[str], transformers.PreTrainedTokenizerFast]:
    """Factory: `make_tokenizer(family)` → a fresh tokenizer (decoy added, no SMI tokens)."""
    return build_tokenizer


@pytest.fixture(scope="session")
def make_installed() -> Callable[[str], Installed]:
    """Factory: `make_installed(family)` → `Installed(family, tokenizer, ids)`, SMI installed."""
    return build_installed


@pytest.fixture
def bytelevel() -> transformers.PreTrainedTokenizerFast:
    return build_tokenizer("bytelevel")


@pytest.fixture
def metaspace_first() -> transformers.PreTrainedTokenizerFast:
    return build_tokenizer("metaspace_first")


@pytest.fixture
def metaspace_always() -> transformers.PreTrainedTokenizerFast:
    return build_tokenizer("metaspace_always")


@pytest.fixture
def wordpiece() -> transformers.PreTrainedTokenizerFast:
    return build_tokenizer("wordpiece")


@pytest.fixture
def neox() -> transformers.PreTrainedTokenizerFast:
    """GPT-NeoX-style (Pythia, Mamba): whitespace-run content tokens, decoy, no SMI tokens."""
    return build_neox()


@pytest.fixture
def llama() -> transformers.PreTrainedTokenizerFast:
    """Llama-style (Metaspace, byte fallback): decoy, no SMI tokens."""
    return build_llama()


@pytest.fixture(params=FAMILIES)
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def any_tokenizer(family: str) -> transformers.PreTrainedTokenizerFast:
    """Each family in turn (a fresh tokenizer, decoy added, no SMI tokens)."""
    return build_tokenizer(family)


@pytest.fixture
def smi_tokenizer(family: str) -> Installed:
    """Each family in turn with the SMI tokens installed: `Installed(family, tokenizer, ids)`."""
    return build_installed(family)


@pytest.fixture(scope="session")
def corpus_words() -> list[str]:
    """The corpus's words (no marker strings), to build trusted payloads from."""
    return list(WORDS)


@pytest.fixture(scope="session")
def decoy() -> str:
    """The decoy non-special added token every fixture tokenizer has."""
    return DECOY
