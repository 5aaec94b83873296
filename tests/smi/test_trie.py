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

from smllm.smi.compile import Compiler
from smllm.smi.convert import from_messages
from smllm.smi.render import render_text
from smllm.smi.stream import InjectionError, SmiError
from smllm.smi.tokens import BLOCK_SIZE, TOKEN_TEXT, Kind, TokenIds, slot_text
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
    with pytest.raises(ValueError, match=r"^SMI ids 65500-65529 are the world vocabulary's own"):
        TrieEncoder(TokenIds.contiguous(65500))
    with pytest.raises(ValueError, match=r"^SMI ids 65500-65529 .* must start past them$"):
        TrieEncoder(base=65500)
    custom = TrieEncoder(TokenIds.contiguous(70000))
    assert custom.vocab_size == 70032 and custom.ids[Kind.EOT] == 70009
    assert TrieEncoder(base=70000).ids == custom.ids
    with pytest.raises(ValueError, match="the SMI ids or their base, not both"):
        TrieEncoder(TokenIds.contiguous(70000), base=70000)


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
    with pytest.raises(InjectionError) as caught:
        trie.check([5, trie.ids[Kind.EOT]], "obs payload")
    assert str(caught.value) == (
        "obs payload encoded to a forbidden id 65539 ('<|eot|>') at position 1: untrusted text "
        "must never yield a structural, special or markup token"
    )
    assert isinstance(caught.value, SmiError)
    with pytest.raises(InjectionError, match=r"forbidden id 0 \('end-of-text'\) at position 0"):
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


def _gpt2_byte_chars() -> dict[int, str]:
    """GPT-2's byte-to-character table (the HF ByteLevel alphabet)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(0x100 + n) for n, b in enumerate(others)})
    return table


def _hf_rendering() -> Any:
    """The HF rendering of the world vocabulary the reference targets (smi-notes §6.2):
    WordPiece over the byte strings (GPT-2's byte characters), id 0 end-of-text."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    chars = _gpt2_byte_chars()
    end = "<|rwkv_tokenizer_end_of_text|>"
    vocab = {end: 0}
    for token_id, data in load_vocab().tokens.items():
        vocab["".join(chars[b] for b in data)] = token_id
    raw = Tokenizer(
        models.WordPiece(
            vocab, unk_token=end, continuing_subword_prefix="", max_input_chars_per_word=2**31 - 1
        )
    )
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    raw.decoder = decoders.ByteLevel()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=end, unk_token=end)


def test_the_block_sits_where_the_reference_implementation_installs_it() -> None:
    """aabbdev/state-model-interface installs the ten tokens with
    `tokenizer.add_special_tokens({"additional_special_tokens": SMI_TOKENS})` (seed order) on the
    HF rendering of the world vocabulary: done here the same way, the ten land on the trie's
    default ids, and a conversation compiled through the trie is the rendering's ids of the
    rendered text (parity with the full tokenizer, as on the other families)."""
    rendering = _hf_rendering()
    trie = TrieEncoder()
    text = "héllo 漢字 world 🙂"
    assert rendering(text, add_special_tokens=False).input_ids == trie.encode(text)
    assert len(rendering) == SMI_BASE
    rendering.add_special_tokens({"additional_special_tokens": list(TOKEN_TEXT)})
    placed = [rendering.convert_tokens_to_ids(text) for text in TOKEN_TEXT]
    assert placed == list(trie.ids.ids[: len(TOKEN_TEXT)]) == list(range(65530, 65540))
    conversation = from_messages(
        [
            {"role": "system", "content": "Be brief. 你好"},
            {"role": "user", "content": "def f():\n    return  1 <tool_call>"},
            {"role": "assistant", "content": "ok 🙂", "reasoning_content": "easy"},
        ]
    )
    compiled = Compiler(trie, trie.ids).compile(conversation).ids
    assert compiled == rendering(render_text(conversation), add_special_tokens=False).input_ids
