"""`PieceDecoder` (metaspace.py): the `▁` family decoded from a learnt table, checked against the
tokenizer's own `decode` on tokenizers trained here: Llama-2 style (Replace + ByteFallback +
Fuse + Strip, byte tokens in the vocabulary), Gemma style (no Strip), and Metaspace with each
prepend scheme; then the shapes that are not the family, and the parser over them."""

import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
import tokenizers
from helpers.smi_parsing import SETTINGS
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, decoders

from smllm.smi.compile import Compiler
from smllm.smi.parser import parse_ids
from smllm.smi.stream import Block, Transmission
from smllm.smi.tokens import Kind
from smllm.smi.vocab.decode import (
    HFDecoder,
    decoder_for,
    piece_backend,
    vocabulary_table,
)
from smllm.smi.vocab.encode import PlainEncoder
from smllm.smi.vocab.install import install_tokens
from smllm.smi.vocab.metaspace import PieceDecoder, PieceTable, Shape, shape_of

from .conftest import CORPUS

SHAPES = ("llama", "gemma", "metaspace_never", "metaspace_first", "metaspace_always")
#: characters the training corpus hasn't got: the byte-fallback shapes spell them in bytes
UNSEEN = ["ß", "Ж", "🦀", "ق", "\x07"]


def _byte_vocabulary(tok: Tokenizer) -> Tokenizer:
    """The 256 `<0xNN>` tokens appended to the model's vocabulary (regular tokens, as in
    Llama's), byte fallback on."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    size = len(vocab)
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = size + byte
    data["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(data))


def build(shape: str) -> Tokenizer:
    if shape in ("llama", "gemma"):
        tok = Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
        tok.normalizer = tokenizers.normalizers.Sequence(
            [tokenizers.normalizers.Prepend("▁"), tokenizers.normalizers.Replace(" ", "▁")]
        )
        parts = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        if shape == "llama":
            parts.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(parts)
    else:
        scheme = shape.removeprefix("metaspace_")
        tok = Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(prepend_scheme=scheme)
        tok.decoder = decoders.Metaspace(prepend_scheme=scheme)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<unk>"], show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    if shape in ("llama", "gemma"):
        tok = _byte_vocabulary(tok)
    tok.add_tokens([AddedToken("<tool_call>", special=False), AddedToken("▁x▁y", special=False)])
    tok.add_special_tokens([AddedToken("ée→<0x41>", special=True), AddedToken("<0x41>>")])
    return tok


@functools.cache
def built(shape: str) -> Tokenizer:
    """`build(shape)`, trained once per session (tests add nothing to it)."""
    return build(shape)


@pytest.fixture(params=SHAPES)
def shaped(request: pytest.FixtureRequest) -> Tokenizer:
    return built(str(request.param))


def _byte(backend: Tokenizer, token_id: int) -> int | None:
    token = backend.id_to_token(token_id)
    if token is None or len(token) != 6 or not token.startswith("<0x"):
        return None
    return int(token[3:5], 16)


def expected(backend: Tokenizer, ids: list[int]) -> str:
    """`decode` of a piece, with the one documented difference: in a byte group that isn't
    UTF-8, the complete characters before its first bad byte are given (decode would make
    them U+FFFD too). Such a group is decoded as two calls split there (the second starts with
    a bad byte, so no Strip nor first-token rule touches it)."""
    byte_shape = shape_of(json.loads(backend.decoder.__getstate__()))
    assert byte_shape is not None
    start = 0
    while start < len(ids):
        if not byte_shape.byte_fallback or _byte(backend, ids[start]) is None:
            start += 1
            continue
        end = start
        while end < len(ids) and _byte(backend, ids[end]) is not None:
            end += 1
        data = bytes(_byte(backend, i) or 0 for i in ids[start:end])
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start > 0:
                cut = start + exc.start
                head = backend.decode(ids[:cut], skip_special_tokens=False)
                return str(head) + expected(backend, ids[cut:])
        start = end
    return str(backend.decode(ids, skip_special_tokens=False))


def streamed(decoder: Any, ids: list[int]) -> str:
    return "".join(decoder.step(i) for i in ids) + decoder.flush()


def test_shapes_are_read_from_the_decoders(shaped: Tokenizer) -> None:
    shape = shape_of(json.loads(shaped.decoder.__getstate__()))
    assert shape is not None and shape.replacement == "▁"
    assert shape.byte_fallback == (shaped.model.byte_fallback is True)
    always = json.loads(shaped.decoder.__getstate__()).get("prepend_scheme") == "always"
    assert shape.first_loses_replacement == always
    assert isinstance(decoder_for(shaped), PieceDecoder)
    assert isinstance(vocabulary_table(shaped), PieceTable)


@pytest.mark.parametrize(
    "decoder",
    [
        {"type": "WordPiece", "prefix": "##", "cleanup": True},
        {"type": "ByteLevel"},
        {"type": "Metaspace", "replacement": "ab", "prepend_scheme": "always"},
        {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
        {
            "type": "Sequence",  # Fuse before ByteFallback
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "Fuse"},
                {"type": "ByteFallback"},
            ],
        },
        {
            "type": "Sequence",  # a Regex pattern
            "decoders": [
                {"type": "Replace", "pattern": {"Regex": "▁+"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        {
            "type": "Sequence",  # Strip at the end of a piece can't stream
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 1},
            ],
        },
        {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": True, "stop": 0},
            ],
        },
        None,
    ],
)
def test_other_decoders_have_no_shape(decoder: Any) -> None:
    assert shape_of(decoder) is None


def test_the_llama_strip_and_a_one_metaspace_sequence_are_shapes() -> None:
    llama = json.loads(build("llama").decoder.__getstate__())
    assert shape_of(llama) == Shape("▁", " ", True, False, " ", 1)
    inner = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}
    assert shape_of({"type": "Sequence", "decoders": [inner]}) == Shape("▁", " ", False, False)


@SETTINGS
@given(st.lists(st.integers(0, 10**9), max_size=20), st.randoms(use_true_random=False))
def test_any_ids_stream_as_decode_gives_them(shaped: Tokenizer, picks: list[int], rng: Any) -> None:
    """Any ids, byte tokens made frequent: the stream plus the flush is the piece's `decode`
    (its piece backend's: Metaspace "first" decodes as "never"), but for the documented
    difference in byte groups that aren't UTF-8."""
    size = shaped.get_vocab_size(with_added_tokens=True)
    first_byte = shaped.token_to_id("<0x00>")
    ids = [
        first_byte + p % 256 if first_byte is not None and rng.random() < 0.5 else p % size
        for p in picks
    ]
    decoder = decoder_for(shaped)
    assert streamed(decoder, ids) == expected(piece_backend(shaped), ids)


@pytest.mark.parametrize("shape", ["llama", "gemma"])
def test_a_byte_group_that_breaks_keeps_what_it_gave(shape: str) -> None:
    backend = built(shape)
    byte = backend.token_to_id("<0x00>")
    x_id = backend.token_to_id("x")
    ids = [byte + 0x41, byte + 0xE2, byte + 0x82, byte + 0x41, x_id]  # "A", a cut "€", "A"
    decoder = decoder_for(backend)
    assert [decoder.step(i) for i in ids] == ["A", "", "", "\ufffd" * 3, "x"]
    assert backend.decode(ids) == "\ufffd" * 4 + "x"  # what decode says instead
    # a group cut by the end of the piece: its held bytes become U+FFFD at the flush
    assert streamed(decoder, [byte + 0xF0, byte + 0x9F]) == "\ufffd\ufffd"
    # once broken, the rest of the group is U+FFFD a byte
    assert streamed(decoder, [byte + 0x80, byte + 0x41, x_id]) == "\ufffd\ufffdx"


def test_strip_takes_the_piece_leading_space_once_even_in_bytes() -> None:
    backend = built("llama")
    byte = backend.token_to_id("<0x00>")
    space = byte + 0x20
    x_id = backend.token_to_id("x")
    decoder = decoder_for(backend)
    assert streamed(decoder, [space, space, x_id]) == " x" == backend.decode([space, space, x_id])
    assert streamed(decoder, [space]) == "" == backend.decode([space])
    assert streamed(decoder, [x_id, space]) == "x "


def test_metaspace_always_reads_the_first_token_of_each_piece(shaped: Tokenizer) -> None:
    if json.loads(shaped.decoder.__getstate__()).get("prepend_scheme") != "always":
        return
    token_ids = shaped.encode("▁x▁y test", add_special_tokens=False).ids
    decoder = decoder_for(shaped)
    for _ in range(2):  # flush starts a new piece: its first token again
        assert streamed(decoder, token_ids) == shaped.decode(token_ids)


def test_only_a_six_character_byte_token_is_a_byte(shaped: Tokenizer) -> None:
    x_id, odd = shaped.token_to_id("x"), shaped.token_to_id("<0x41>>")
    assert streamed(decoder_for(shaped), [x_id, odd]) == "x<0x41>>"
    assert shaped.decode([x_id, odd], skip_special_tokens=False) == "x<0x41>>"


def test_unknown_ids_are_refused(shaped: Tokenizer) -> None:
    decoder = decoder_for(shaped)
    for token_id in (shaped.get_vocab_size(with_added_tokens=True), -1, 10**30):
        with pytest.raises(ValueError, match="not in the tokenizer's vocabulary"):
            decoder.step(token_id)


def test_the_inline_path_opens_only_where_a_text_is_read_as_it_is() -> None:
    backend = built("llama")
    decoder = decoder_for(backend)
    x_id = backend.token_to_id("x")
    _, table, _ = decoder.fast_step()
    assert table == {}  # the piece's start: Strip pending
    decoder.step(x_id)
    _, table, _ = decoder.fast_step()
    assert table[x_id] == "x"
    decoder.step(backend.token_to_id("<0xE2>"))
    _, table, _ = decoder.fast_step()
    assert table == {}  # a group is open


@functools.cache
def llama_setup() -> tuple[Any, Any, Compiler]:
    import transformers

    raw = Tokenizer.from_str(built("llama").to_str())
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>")
    ids = install_tokens(tokenizer)
    return tokenizer, ids, Compiler(PlainEncoder.from_tokenizer(tokenizer, ids), ids)


texts = st.lists(
    st.sampled_from(["\n", " ", "  ", "a", "test", "é", "字", "🙂", *UNSEEN, ".", "{"]),
    max_size=12,
).map("".join)


@SETTINGS
@given(st.lists(st.lists(texts, min_size=1, max_size=3), min_size=1, max_size=3))
def test_llama_style_conversations_parse_back(shape: list[list[str]]) -> None:
    """Through the compiler (unseen characters spelt in byte tokens, every framing "\\n" a
    `<0x0A>`) and back through the parser with the piece decoder, exactly."""
    tokenizer, ids, compiler = llama_setup()
    kinds = [Kind.THINK, Kind.OUT, Kind.ACT]
    conversation = [
        Transmission.of(Block.of(kinds[n % 3], text) for n, text in enumerate(payloads))
        for payloads in shape
    ]
    token_ids = compiler.compile(conversation).ids
    make: Callable[[Any], Any]
    for make in (decoder_for, HFDecoder):
        assert parse_ids(token_ids, ids, make(tokenizer), side="model") == conversation
