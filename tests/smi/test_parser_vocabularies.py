"""The streaming parser on real vocabularies: the trained tokenizers of conftest.py through
`decoder_for` (a ByteLevel one's byte table, `HFDecoder` for the others: compiled
conversations parse back, Metaspace and WordPiece quirks) and through `HFDecoder` itself, and
the RWKV world vocabulary through `token_bytes`. The toy-vocabulary tests are in
test_parser.py."""

import gc
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from helpers.smi_parsing import (
    SETTINGS,
    TOY,
    TOY_IDS,
    feed_all,
    texts,
    toy_encode,
    toy_parser,
    transmissions_of,
)
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import AddedToken, decoders

from smllm.smi.compile import Compiler
from smllm.smi.parser import (
    Decoder,
    ParseError,
    PayloadText,
    StreamParser,
    Violation,
    parse_ids,
)
from smllm.smi.render import render_text
from smllm.smi.stream import Block, TokenRun, Transmission
from smllm.smi.tokens import Kind, TokenIds
from smllm.smi.vocab.decode import (
    BytesDecoder,
    ByteTable,
    HFDecoder,
    PieceDecoder,
    decoder_for,
    piece_backend,
    vocabulary_table,
)
from smllm.smi.vocab.encode import PlainEncoder
from smllm.smi.vocab.metaspace import PieceTable
from smllm.smi.vocab.trie import TrieEncoder

from .conftest import build_tokenizer

# -- HF decoders ---------------------------------------------------------------------------------


class HF(NamedTuple):
    family: str
    tokenizer: Any
    ids: TokenIds
    encoder: PlainEncoder
    compiler: Compiler

    def __repr__(self) -> str:
        return f"HF({self.family})"


@pytest.fixture
def hf(smi_tokenizer: Any) -> HF:
    """Each conftest family with the SMI tokens installed, its plain encoder and compiler."""
    encoder = PlainEncoder.from_tokenizer(smi_tokenizer.tokenizer, smi_tokenizer.ids)
    return HF(
        smi_tokenizer.family,
        smi_tokenizer.tokenizer,
        smi_tokenizer.ids,
        encoder,
        Compiler(encoder, smi_tokenizer.ids),
    )


def lossless(hf: HF) -> bool:
    """Whether any text piece comes back as it went in: not WordPiece (no newlines, lower
    case), not Metaspace "always" (a piece that starts with a space loses it: the `▁` the
    scheme puts in front is the space's own, and the decoder strips it)."""
    return hf.family in ("bytelevel", "metaspace_first")


#: characters every conftest tokenizer was trained on (no <unk> for the Metaspace ones)
HF_ALPHABET = ["\n", " ", " ", "a", "e", "t", "s", "é", "字", "🙂", "🚀", ".", "{", '"', "\t"]
hf_texts = st.lists(st.sampled_from(HF_ALPHABET), max_size=16).map("".join)
HF_IMAGE = range(100_000, 100_100)


@SETTINGS
@pytest.mark.parametrize("make_decoder", [HFDecoder, decoder_for])
@given(hf_texts)
def test_hf_decoder_adds_up_to_one_decode(
    hf: HF, make_decoder: Callable[[Any], Decoder], text: str
) -> None:
    """Streamed pieces plus the flush equal one decode of all the ids, for every family (the
    plain encoder's decode: no leading space dropped), through `HFDecoder` and through the
    decoder `decoder_for` picks."""
    token_ids = hf.encoder.encode(text)
    decoder = make_decoder(hf.tokenizer)
    streamed = "".join(decoder.step(i) for i in token_ids) + decoder.flush()
    assert streamed == hf.encoder.decode(token_ids)
    if lossless(hf):
        assert streamed == text


@SETTINGS
@given(st.lists(st.lists(st.tuples(hf_texts, st.booleans()), min_size=1, max_size=3), max_size=3))
def test_compiled_conversations_parse_back(hf: HF, shape: list[list[tuple[str, bool]]]) -> None:
    """The compiler's ids parse back to the conversation (ByteLevel, Metaspace), or to the
    decoded payloads with the framing removed (WordPiece, which can't encode newlines); so do
    the full tokenizer's ids for the rendered text (parity)."""
    kinds = [Kind.THINK, Kind.OUT, Kind.ACT]
    conversation = [
        Transmission.of(
            Block.of(kinds[n % 3], [text, TokenRun((100_001,), "image"), text] if run else text)
            for n, (text, run) in enumerate(blocks)
        )
        for blocks in shape
    ]
    token_ids = hf.compiler.compile(conversation).ids
    parsed = parse_ids(
        token_ids, hf.ids, decoder_for(hf.tokenizer), side="model", modalities={"image": HF_IMAGE}
    )
    if lossless(hf):
        assert parsed == conversation
    else:
        assert [[b.kind for b in t.blocks] for t in parsed] == [
            [b.kind for b in t.blocks] for t in conversation
        ]
        for got, want in zip(parsed, conversation, strict=True):
            for got_block, want_block in zip(got.blocks, want.blocks, strict=True):
                runs = [p for p in want_block.parts if isinstance(p, TokenRun)]
                assert [p for p in got_block.parts if isinstance(p, TokenRun)] == runs
                if not runs:  # the decode of the one segment, framing removed
                    segment = hf.encoder.encode("\n" + want_block.text + "\n")
                    text = hf.encoder.decode(segment).removeprefix("\n").removesuffix("\n")
                    assert got_block.text == text
    plain = [Transmission.of(Block.of(b.kind, b.text) for b in t.blocks) for t in conversation]
    full = hf.tokenizer(render_text(plain), add_special_tokens=False)["input_ids"]
    assert parse_ids(full, hf.ids, decoder_for(hf.tokenizer), side="model") == parse_ids(
        hf.compiler.compile(plain).ids, hf.ids, decoder_for(hf.tokenizer), side="model"
    )


@SETTINGS
@given(st.lists(st.lists(hf_texts, min_size=1, max_size=3), min_size=1, max_size=3))
def test_one_id_at_a_time_gives_what_the_whole_stream_gives(hf: HF, shape: list[list[str]]) -> None:
    """The parser's inline path (ids fed one at a time, read from the decoder's table once it
    has learnt them) against the whole stream fed at once, twice: the second time every id is
    learnt."""
    kinds = [Kind.THINK, Kind.OUT, Kind.ACT]
    conversation = [
        Transmission.of(Block.of(kinds[n % 3], text) for n, text in enumerate(payloads))
        for payloads in shape
    ]
    token_ids = hf.compiler.compile(conversation).ids
    whole = StreamParser(hf.ids, decoder_for(hf.tokenizer), side="model").feed(token_ids)
    for _ in range(2):
        parser = StreamParser(hf.ids, decoder_for(hf.tokenizer), side="model")
        assert [e for token_id in token_ids for e in parser.feed(token_id)] == whole


def test_a_seed_conversation_through_the_compiler(hf: HF) -> None:
    act = {"id": "a1", "type": "tool", "name": "bash", "arguments": {"command": "git status"}}
    conversation = [
        Transmission.of(
            [
                Block.of("ctrl", {"reasoning": {"mode": "adaptive", "effort": "medium"}}),
                Block.of("sys", "You are a coding agent."),
                Block.of("caps", {"tools": [{"name": "bash", "parameters": {}}]}),
                Block.of("usr", "Fix the failing authentication test."),
            ]
        ),
        Transmission.of(
            [Block.of("think", "Inspect code before modifying it."), Block.of("act", act)]
        ),
        Transmission.of([Block.of("obs", {"caused_by": "a1", "ok": True, "content": "42"})]),
        Transmission.of([Block.of("out", "Errors are observations.")]),
    ]
    token_ids = hf.compiler.compile(conversation).ids
    if hf.family != "wordpiece":
        assert parse_ids(token_ids, hf.ids, decoder_for(hf.tokenizer)) == conversation
        return
    # WordPiece spaces out and lowercases JSON beyond reading: the structure still holds, and
    # a lenient parse says which payloads broke a rule
    events = feed_all(
        StreamParser(hf.ids, decoder_for(hf.tokenizer), side="any", strict=False), token_ids
    )
    assert [[b.kind for b in t.blocks] for t in transmissions_of(events)] == [
        [b.kind for b in t.blocks] for t in conversation
    ]
    violations = [e.message for e in events if isinstance(e, Violation)]
    assert violations and all("JSON" in m for m in violations)


def test_wordpiece_loses_the_framing_newlines_and_still_parses(make_installed: Any) -> None:
    installed = make_installed("wordpiece")
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    assert encoder.encode("\n") == []
    block = Block.of("out", "Fix the failing test.")
    token_ids = Compiler(encoder, installed.ids).compile([Transmission.of([block])]).ids
    (transmission,) = parse_ids(token_ids, installed.ids, decoder_for(installed.tokenizer))
    assert transmission.blocks == (Block.of("out", "fix the failing test."),)


def test_metaspace_text_after_a_run_keeps_its_leading_space(make_installed: Any) -> None:
    """With prepend "first" the piece after a run is encoded with "never" and must be decoded
    so. (With "always" that space is lost when encoding: see `lossless`.)"""
    installed = make_installed("metaspace_first")
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    block = Block.of("out", [" test", TokenRun((100_001,), "image"), " test "])
    token_ids = Compiler(encoder, installed.ids).compile([Transmission.of([block])]).ids
    (transmission,) = parse_ids(
        token_ids, installed.ids, decoder_for(installed.tokenizer), modalities={"i": HF_IMAGE}
    )
    assert transmission.blocks == (Block.of("out", [" test", TokenRun((100_001,), "i"), " test "]),)
    # what the tokenizer's own decoder does with a piece that starts with "▁"
    assert installed.tokenizer.backend_tokenizer.decode(encoder.encode(" test")) == "test"


def test_the_piece_backend_is_made_once_and_again_after_new_tokens(make_tokenizer: Any) -> None:
    tokenizer = make_tokenizer("metaspace_first")
    backend = tokenizer.backend_tokenizer
    first = piece_backend(backend)
    assert first is not backend and piece_backend(backend) is first
    tokenizer.add_tokens(["<new>"])
    again = piece_backend(backend)
    assert again is not first and again.token_to_id("<new>") is not None
    bytelevel = make_tokenizer("bytelevel").backend_tokenizer
    assert piece_backend(bytelevel) is bytelevel


def test_the_decoy_added_token_decodes_as_text(hf: HF) -> None:
    decoy = hf.tokenizer.convert_tokens_to_ids("<tool_call>")
    token_ids = [hf.ids[Kind.OUT], *hf.encoder.encode("\n"), decoy, hf.ids[Kind.EOT]]
    (transmission,) = parse_ids(token_ids, hf.ids, decoder_for(hf.tokenizer))
    assert transmission.blocks[0].text == "<tool_call>"


def test_hf_decoder_takes_a_backend_and_refuses_other_things(bytelevel: Any) -> None:
    decoder = HFDecoder(bytelevel.backend_tokenizer)
    encode = bytelevel.backend_tokenizer.encode
    assert "".join(decoder.step(i) for i in encode("héllo").ids) + decoder.flush() == "héllo"
    with pytest.raises(ValueError, match="vocabulary"):
        decoder.step(10**7)
    with pytest.raises(TypeError, match="object is not a fast tokenizer"):
        HFDecoder(object())
    assert isinstance(decoder, Decoder)


def test_decoder_for_picks_a_table_where_the_decoder_reads_each_token_alone(
    bytelevel: Any, metaspace_first: Any, wordpiece: Any
) -> None:
    assert isinstance(decoder_for(bytelevel), BytesDecoder)
    assert isinstance(decoder_for(bytelevel.backend_tokenizer), BytesDecoder)
    assert isinstance(decoder_for(_WithBytes()), BytesDecoder)
    assert isinstance(decoder_for(metaspace_first), PieceDecoder)
    assert isinstance(decoder_for(wordpiece), HFDecoder)
    assert vocabulary_table(wordpiece) is None
    wrapped = bytelevel.backend_tokenizer
    table = vocabulary_table(wrapped)
    wrapped.decoder = decoders.Sequence([decoders.ByteLevel()])  # not plain: DecodeStream
    assert isinstance(decoder_for(wrapped), HFDecoder)
    wrapped.decoder = decoders.ByteLevel()  # the same decoder again: the same table
    assert vocabulary_table(wrapped) is table
    wrapped.decoder = decoders.Metaspace()  # another decoder: its own table
    assert isinstance(vocabulary_table(wrapped), PieceTable)
    wrapped.decoder = decoders.ByteLevel()
    assert isinstance(vocabulary_table(wrapped), ByteTable)
    assert vocabulary_table(wrapped) is not table
    with pytest.raises(TypeError, match="object is not a fast tokenizer"):
        vocabulary_table(object())


def test_the_byte_table_gives_every_id_as_the_tokenizer_decodes_it(hf: HF) -> None:
    """Every id of the vocabulary (the SMI tokens, the decoy, a special `<|endoftext|>`, byte
    tokens that are parts of characters) and an added token the ByteLevel map can't spell (a
    space, a non-ASCII special): the table's bytes, decoded lossily, equal `decode([id])`."""
    if hf.family != "bytelevel":
        return  # the `▁` family's tables: test_metaspace.py
    backend = hf.tokenizer.backend_tokenizer
    backend.add_tokens([AddedToken("<de coy>", special=False), AddedToken("ée→x", special=True)])
    table = vocabulary_table(backend)
    assert isinstance(table, ByteTable)
    size = backend.get_vocab_size(with_added_tokens=True)
    singles = backend.decode_batch([[i] for i in range(size)], skip_special_tokens=False)
    assert [table[i].decode("utf-8", "replace") for i in range(size)] == singles
    assert table[backend.token_to_id("<de coy>")] == b"<de coy>"
    assert table[backend.token_to_id("ée→x")] == "ée→x".encode()
    partial = [i for i in range(size) if i not in table.texts]
    assert partial and all("\ufffd" in singles[i] for i in partial)  # parts of characters
    for token_id in (size, -1, 10**30):
        with pytest.raises(ValueError, match="no bytes"):
            table[token_id]


@SETTINGS
@given(st.lists(st.integers(0, 10**9), max_size=24))
def test_a_bytelevel_stream_adds_up_to_one_decode_of_any_ids(
    bytelevel: Any, picks: list[int]
) -> None:
    """Any ids at all (parts of characters in any order, added and special tokens): the byte
    table's stream plus the flush is `decode` of them all."""
    backend = bytelevel.backend_tokenizer
    token_ids = [p % backend.get_vocab_size(with_added_tokens=True) for p in picks]
    decoder = decoder_for(bytelevel)
    streamed = "".join(decoder.step(i) for i in token_ids) + decoder.flush()
    assert streamed == backend.decode(token_ids, skip_special_tokens=False)


def test_decoders_of_one_vocabulary_share_its_table_and_keep_it_alive(bytelevel: Any) -> None:
    table = vocabulary_table(bytelevel)
    assert isinstance(table, ByteTable)
    assert vocabulary_table(bytelevel.backend_tokenizer) is table
    first_id = bytelevel.backend_tokenizer.token_to_id("a")
    decoder_for(bytelevel).step(first_id)
    assert table.texts[first_id] == "a"  # learnt by one decoder, there for the next
    rwkv_like = _WithBytes()
    assert decoder_for(rwkv_like)._table is decoder_for(rwkv_like)._table  # type: ignore[attr-defined]
    # the table refers to its vocabulary weakly; a decoder holds it while it lives
    fresh = build_tokenizer("bytelevel")
    gone = weakref.ref(fresh.backend_tokenizer)
    decoder = decoder_for(fresh)
    del fresh
    gc.collect()
    assert gone() is not None
    assert decoder.step(first_id) == "a"
    del decoder
    gc.collect()
    assert gone() is None


def test_the_inline_path_waits_while_a_character_is_incomplete(hf: HF) -> None:
    """An id whose text the table knows, after a part of a character: the parser's inline
    path must not give it ahead of the broken character (`decode` gives U+FFFD first)."""
    if hf.family != "bytelevel":
        return
    backend = hf.tokenizer.backend_tokenizer
    a_id = backend.token_to_id("a")
    lead = backend.token_to_id("Ã")  # the ByteLevel spelling of the byte 0xC3
    body = [a_id, a_id, lead, a_id, a_id]
    token_ids = [hf.ids[Kind.OUT], *hf.encoder.encode("\n"), *body, hf.ids[Kind.EOT]]
    for _ in range(2):  # the second time with "a" learnt by the shared table
        (transmission,) = parse_ids(token_ids, hf.ids, decoder_for(hf.tokenizer), side="model")
        assert transmission.blocks[0].text == "aa\ufffdaa" == backend.decode(body)


@pytest.fixture(scope="module")
def rwkv() -> TrieEncoder:
    return TrieEncoder()


@SETTINGS
@given(st.lists(st.lists(texts, min_size=1, max_size=3), min_size=1, max_size=3))
def test_rwkv_world_streams_parse_back_through_token_bytes(
    rwkv: TrieEncoder, shape: list[list[str]]
) -> None:
    """The RWKV world vocabulary splits emoji across ids (🙂 is F0 9F | 99 82): the bytes
    decoder gives every character whole and the conversation back."""
    kinds = [Kind.THINK, Kind.OUT, Kind.ACT]
    conversation = [
        Transmission.of(Block.of(kinds[n % 3], text) for n, text in enumerate(payloads))
        for payloads in shape
    ]
    token_ids = Compiler(rwkv, rwkv.ids).compile(conversation).ids
    parser = StreamParser(rwkv.ids, BytesDecoder(rwkv.token_bytes))
    events = feed_all(parser, token_ids)
    assert transmissions_of(events) == conversation
    assert not any("\ufffd" in e.text for e in events if isinstance(e, PayloadText))


def test_rwkv_id_by_id_decoding_would_break_characters(rwkv: TrieEncoder) -> None:
    token_ids = rwkv.encode("🙂")
    assert len(token_ids) == 2
    assert all("\ufffd" in rwkv.decode([i]) for i in token_ids)
    decoder = BytesDecoder(rwkv.token_bytes)
    assert [decoder.step(i) for i in token_ids] == ["", "🙂"]


class _WithBytes:
    def token_bytes(self, token_id: int) -> bytes:
        return TOY[token_id]


def test_an_unknown_id_is_refused_in_strict_and_a_violation_in_lenient() -> None:
    token_ids = [
        TOY_IDS[Kind.OUT],
        *toy_encode("\nab"),
        99999,
        *toy_encode("c\n"),
        TOY_IDS[Kind.EOT],
    ]
    with pytest.raises(ParseError, match="no bytes"):
        feed_all(toy_parser(), token_ids)
    events = feed_all(toy_parser(strict=False), token_ids)
    assert [type(e) for e in events].count(Violation) == 1
    assert transmissions_of(events) == [Transmission.of([Block.of("out", "abc")])]
