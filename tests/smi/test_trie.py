"""TrieEncoder: the same ids as rwkv's TRIE_TOKENIZER on every kind of text, exact round
trips, the SMI block after the vocabulary, no forbidden id from any payload."""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smllm.smi.tokens import BLOCK_SIZE, TOKEN_TEXT, Kind, TokenIds, slot_text
from smllm.smi.vocab.encode import InjectionError
from smllm.smi.vocab.trie import END_OF_TEXT, SMI_BASE, TrieEncoder, default_vocab_path, load_vocab

FUZZ = settings(max_examples=200, deadline=None)


@functools.cache
def _reference() -> Any:
    from rwkv.rwkv_tokenizer import TRIE_TOKENIZER

    return TRIE_TOKENIZER(str(default_vocab_path()))


@functools.cache
def _trie() -> TrieEncoder:
    return TrieEncoder()


@pytest.fixture
def reference() -> Any:
    return _reference()


@pytest.fixture
def trie() -> TrieEncoder:
    return _trie()


SAMPLES = {
    "ascii": "The quick brown fox jumps over the lazy dog. 0123456789 !@#$%^&*()",
    "code": 'def f(x):\n    return {"a": [1, 2.5, None]}  # comment\n\n\tif x != 0:\n',
    "cjk": "漢字とひらがな、中文文本，日本語のテキスト。한국어 텍스트",
    "emoji_zwj": "👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 👍🏽 ❤️‍🔥",
    "combining": "e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0357\u035b q\u0307\u0323",
    "control": "\x00\x01\x07\x1b[31mred\x1b[0m\r\n\x7f\x85\u2028\u2029",
    "spaces": " " * 300 + "\t" * 40 + "\n" * 30 + "-" * 200 + "#" * 90,
    "markers": "".join(TOKEN_TEXT) + " <|bos|> <|eos|> <|endoftext|> <tool_call>",
    "mixed": "Café crème — naïve résumé; Ελληνικά; Русский; עברית; العربية; हिन्दी",
    "surrogate_free_astral": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 𓀀 🜁",
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_same_ids_as_rwkv_and_exact_round_trip(
    name: str, trie: TrieEncoder, reference: Any
) -> None:
    text = SAMPLES[name]
    ids = trie.encode(text)
    assert ids == reference.encode(text)
    assert trie.decode(ids) == text
    assert b"".join(trie.token_bytes(i) for i in ids) == text.encode("utf-8")


def test_a_100_kb_text(trie: TrieEncoder, reference: Any) -> None:
    rng = random.Random(7)
    parts = [*SAMPLES.values(), Path(__file__).read_text(encoding="utf-8")]
    text = ""
    while len(text.encode("utf-8")) < 100_000:
        text += rng.choice(parts)
    ids = trie.encode(text)
    assert ids == reference.encode(text)
    assert trie.decode(ids) == text
    assert trie.encode_batch([text[:5000], text[5000:9000]]) == [
        reference.encode(text[:5000]),
        reference.encode(text[5000:9000]),
    ]


@FUZZ
@given(st.text())
def test_random_unicode_matches_rwkv(text: str) -> None:
    trie = _trie()
    ids = trie.encode(text)
    assert ids == _reference().encode(text)
    assert trie.decode(ids) == text


@FUZZ
@given(st.binary(max_size=64))
def test_random_bytes_encode_and_round_trip(data: bytes) -> None:
    trie = _trie()
    ids = trie.encode_bytes(data)
    assert b"".join(trie.token_bytes(i) for i in ids) == data
    assert trie.forbidden.isdisjoint(ids)


def test_the_vocabulary_and_the_block(trie: TrieEncoder) -> None:
    assert trie.vocab.last_id == 65529 == SMI_BASE - 1
    assert len(trie.vocab.tokens) == 65529 and END_OF_TEXT not in trie.vocab.tokens
    assert trie.ids == TokenIds.contiguous(65530)
    assert trie.ids[Kind.CTRL] == 65530 and trie.ids.ids[-1] == 65561
    assert trie.vocab_size == 65562
    assert trie.forbidden == frozenset(range(65530, 65562)) | {0}
    assert all(bytes([b]) in trie.vocab.tokens.values() for b in range(256))
    assert trie.token_bytes(trie.ids[Kind.EOT]) == b"<|eot|>"
    assert trie.token_bytes(0) == b""
    with pytest.raises(ValueError, match="65562"):
        trie.token_bytes(65562)
    assert trie.decode([trie.ids[Kind.USR], *trie.encode("hi")]) == "<|usr|>hi"


def test_the_cache_parses_once() -> None:
    assert load_vocab() is load_vocab()
    assert TrieEncoder().vocab is TrieEncoder().vocab


def test_ids_inside_the_vocabulary_are_refused() -> None:
    with pytest.raises(ValueError, match=r"SMI ids \[65500"):
        TrieEncoder(TokenIds.contiguous(65500))
    custom = TrieEncoder(TokenIds.contiguous(70000))
    assert custom.vocab_size == 70032 and custom.ids[Kind.EOT] == 70009


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.sampled_from([*TOKEN_TEXT, *(slot_text(s) for s in range(BLOCK_SIZE))]),
            st.text(max_size=8),
        ),
        max_size=10,
    ).map("".join)
)
def test_no_payload_yields_a_forbidden_id(text: str) -> None:
    trie = _trie()
    ids = trie.encode(text)
    assert trie.forbidden.isdisjoint(ids)
    assert trie.decode(ids) == text


def test_check_raises_naming_the_payload(trie: TrieEncoder) -> None:
    with pytest.raises(InjectionError, match=r"obs payload .*forbidden id 65539 at position 1"):
        trie.check([5, trie.ids[Kind.EOT]], "obs payload")
    with pytest.raises(InjectionError, match="forbidden id 0"):
        trie.check([0], "x")


def test_a_vocabulary_file_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "v.txt"
    lines = [f"{b + 1} {bytes([b])!r} 1" for b in range(256)]
    lines += ["257 'ab' 2", "258 'é' 2", "259 b'\\xff\\xfe' 2", '260 "it\'s" 4']
    good.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocab = load_vocab(str(good))
    assert vocab.tokens[258] == "é".encode() and vocab.tokens[259] == b"\xff\xfe"
    assert vocab.tokens[260] == b"it's"
    trie = TrieEncoder(path=str(good))
    assert trie.encode("abé") == [257, 258]
    assert trie.ids == TokenIds.contiguous(261)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 'ab' 3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt:1: 2 bytes, the line says 3"):
        load_vocab(str(bad))
    evil = tmp_path / "evil.txt"
    evil.write_text("1 __import__('os').getcwd() 1\n", encoding="utf-8")
    with pytest.raises(ValueError):  # literal_eval refuses code: nothing runs
        load_vocab(str(evil))
