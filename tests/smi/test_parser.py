"""The streaming parser (smllm.smi.parser) and its incremental decoders (smllm.smi.vocab.decode).

Streams are built here the way the compiler builds them: structural ids, and each segment
between them ("\\n" + payload + "\\n" inside a block, "\\n" after an EOT) encoded as plain
text; token runs of other modalities go in as they are, the text around them encoded piece by
piece. Two vocabularies: a toy byte-level one (ids 0-255 are bytes, a few merges such as
"\\n\\n", every non-ASCII character split across byte ids) decoded by `BytesDecoder`, and the
trained tokenizers of conftest.py decoded by `HFDecoder`.
"""

from __future__ import annotations

import json

import pytest
from helpers.smi_parsing import (
    BY_BYTES,
    MODALITIES,
    SETTINGS,
    TOY,
    TOY_IDS,
    block_ids,
    conversations,
    feed_all,
    model_block,
    normalized,
    stream_ids,
    toy_decoder,
    toy_encode,
    toy_parser,
    transmissions_of,
)
from hypothesis import given
from hypothesis import strategies as st

from smllm.smi.parser import (
    BlockEnd,
    BlockStart,
    EndOfTransmission,
    Event,
    Grammar,
    ParseError,
    PayloadText,
    PayloadTokens,
    Phase,
    Violation,
    parse_ids,
)
from smllm.smi.parser.grammar import NEXT, Refused
from smllm.smi.stream import Block, Reasoning, SmiError, TokenRun, Transmission
from smllm.smi.tokens import BOS, EOS, MODEL_SIDE, RUNTIME_SIDE, Kind
from smllm.smi.vocab.decode import BytesDecoder

# -- round trips -------------------------------------------------------------------------------


@SETTINGS
@given(conversations)
def test_a_conversation_parses_back_to_itself(conversation: list[Transmission]) -> None:
    token_ids = stream_ids(conversation, TOY_IDS, toy_encode)
    parser = toy_parser(side="any", modalities=MODALITIES)
    assert transmissions_of(feed_all(parser, token_ids)) == conversation


@SETTINGS
@given(conversations, st.data())
def test_any_chunking_gives_the_same_events(
    conversation: list[Transmission], data: st.DataObject
) -> None:
    token_ids = stream_ids(conversation, TOY_IDS, toy_encode)
    one_by_one = feed_all(toy_parser(side="any", modalities=MODALITIES), token_ids)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(token_ids)), max_size=8)))
    parser = toy_parser(side="any", modalities=MODALITIES)
    chunked: list[Event] = []
    for start, end in zip([0, *cuts], [*cuts, len(token_ids)], strict=True):
        chunked += parser.feed(token_ids[start:end])
    assert chunked + parser.finish() == one_by_one


@SETTINGS
@given(st.lists(model_block, min_size=1, max_size=4))
def test_text_deltas_add_up_to_the_block(blocks: list[Block]) -> None:
    """Deltas carry no framing, the events come in order, and the pieces of each block add
    up to its parts."""
    token_ids = stream_ids([Transmission.of(blocks)], TOY_IDS, toy_encode)
    events = feed_all(toy_parser(modalities=MODALITIES), token_ids)
    rebuilt: list[Block] = []
    pieces: list[str | TokenRun] = []
    for event in events:
        if isinstance(event, BlockStart):
            pieces = []
        elif isinstance(event, PayloadText):
            assert event.text
            pieces.append(event.text)
        elif isinstance(event, PayloadTokens):
            pieces.append(TokenRun(event.ids, event.modality))
        elif isinstance(event, BlockEnd):
            assert normalized(event.block.kind, pieces) == event.block
            rebuilt.append(event.block)
    assert rebuilt == blocks


EDGE_PAYLOADS = [
    "",
    "\n",
    "\n\n",
    "\n\n\n",
    " ",
    "  leading and trailing  ",
    "\nleading newline",
    "trailing newline\n",
    "a\n\nb",
    "hello\n\n",
    "\n\nhello",
    "漢字 と ひらがな、中文 文本",
    "Emoji: 🙂 👍 🎉 👩‍💻 ❤️ 🚀",
    "\r\n",
    '{"id":"a1","type":"tool","name":"bash","arguments":{"command":"git status"}}',
]


@pytest.mark.parametrize("payload", EDGE_PAYLOADS)
@pytest.mark.parametrize("kind", sorted(set(Kind) - {Kind.EOT, Kind.CTRL, Kind.CAPS}))
def test_every_block_type_and_edge_payload(kind: Kind, payload: str) -> None:
    side = "model" if kind in MODEL_SIDE else "runtime"
    conversation = [Transmission.of([Block.of(kind, payload)])]
    token_ids = stream_ids(conversation, TOY_IDS, toy_encode)
    assert transmissions_of(feed_all(toy_parser(side=side), token_ids)) == conversation


def test_ctrl_and_caps_blocks_round_trip() -> None:
    ctrl = {"reasoning": {"mode": "fixed", "effort": "high", "max_tokens": 64}, "realtime": True}
    caps = {"tools": [{"name": "bash", "parameters": {"type": "object"}}]}
    conversation = [
        Transmission.of([Block.of("ctrl", ctrl), Block.of("caps", caps), Block.of("usr", "hi")]),
        Transmission.of([Block.of("think", "x"), Block.of("out", "y")]),
    ]
    parser = toy_parser(side="any")
    events = feed_all(parser, stream_ids(conversation, TOY_IDS, toy_encode))
    assert transmissions_of(events) == conversation
    assert parser.reasoning == Reasoning("fixed", "high", 64)


def test_the_seeds_coding_agent_conversation() -> None:
    act = {"id": "a1", "type": "tool", "name": "read_file", "arguments": {"path": "src/auth.ts"}}
    conversation = [
        Transmission.of(
            [
                Block.of("ctrl", {"reasoning": {"mode": "adaptive", "effort": "high"}}),
                Block.of("sys", "You are a secure autonomous coding agent."),
                Block.of("dev", "Inspect code before modifying it.\nRun relevant tests."),
                Block.of("caps", {"tools": [{"name": "read_file", "parameters": {}}]}),
                Block.of("usr", "Fix the failing authentication test."),
            ]
        ),
        Transmission.of([Block.of("think", "I need to inspect it."), Block.of("act", act)]),
        Transmission.of([Block.of("obs", {"caused_by": "a1", "ok": True, "content": "..."})]),
        Transmission.of([Block.of("out", "Fixed. All 42 tests pass.")]),
    ]
    token_ids = stream_ids(conversation, TOY_IDS, toy_encode)
    assert parse_ids(token_ids, TOY_IDS, toy_decoder()) == conversation
    assert json.loads(conversation[1].blocks[1].text) == act


# -- framing at the text level -----------------------------------------------------------------


def test_a_trailing_newline_waits_for_the_next_id() -> None:
    parser = toy_parser()
    assert parser.feed(TOY_IDS[Kind.OUT]) == [BlockStart(Kind.OUT)]
    # one delta per id ("\n", "a", "b", "\n" are single bytes here)
    assert parser.feed(toy_encode("\nab\n")) == [
        PayloadText(Kind.OUT, "a"),
        PayloadText(Kind.OUT, "b"),
    ]
    # more text: the held "\n" was payload after all
    assert parser.feed(toy_encode("c")) == [PayloadText(Kind.OUT, "\nc")]
    assert parser.feed(toy_encode("\n")) == []
    events = parser.feed(TOY_IDS[Kind.EOT])
    assert events[0] == BlockEnd(Block.of(Kind.OUT, "ab\nc"))


def test_merged_newline_tokens_are_split_at_the_text_level() -> None:
    """The toy vocabulary's "\\n\\n" and "\\n\\n\\n" merge framing with payload newlines."""
    for payload, merged in [
        ("", b"\n\n"),
        ("\n", b"\n\n\n"),
        ("o\n", b"o\n\n"),
        ("hello", b"llo\n"),
    ]:
        token_ids = block_ids(Block.of("out", payload), TOY_IDS, toy_encode)
        assert BY_BYTES[merged] in token_ids
        events = feed_all(toy_parser(), [*token_ids, TOY_IDS[Kind.EOT]])
        assert transmissions_of(events) == [Transmission.of([Block.of("out", payload)])]


def test_a_payload_without_framing_newlines_is_read_as_it_is() -> None:
    token_ids = [TOY_IDS[Kind.ACT], *toy_encode('{"id":"a1"}'), TOY_IDS[Kind.EOT]]
    (transmission,) = transmissions_of(feed_all(toy_parser(), token_ids))
    assert transmission.blocks == (Block.of("act", '{"id":"a1"}'),)


def test_only_one_newline_is_framing_on_each_side() -> None:
    token_ids = [TOY_IDS[Kind.OUT], *toy_encode("\n\n\nx\n\n\n"), TOY_IDS[Kind.EOT]]
    (transmission,) = transmissions_of(feed_all(toy_parser(), token_ids))
    assert transmission.blocks[0].text == "\n\nx\n\n"


def test_a_newline_before_a_run_is_payload() -> None:
    run = TokenRun((2001, 2002), "image")
    block = Block.of("usr", ["look:\n", run, "\nok"])
    token_ids = [*block_ids(block, TOY_IDS, toy_encode), TOY_IDS[Kind.EOT]]
    events = feed_all(toy_parser(side="runtime", modalities=MODALITIES), token_ids)
    assert transmissions_of(events) == [Transmission.of([block])]
    assert PayloadTokens(Kind.USR, (2001,), "image") in events


def test_runs_of_different_modalities_stay_apart() -> None:
    block = Block.of("out", [TokenRun((2001,), "image"), TokenRun((3001, 3002), "audio")])
    token_ids = [*block_ids(block, TOY_IDS, toy_encode), TOY_IDS[Kind.EOT]]
    events = feed_all(toy_parser(modalities=MODALITIES), token_ids)
    assert transmissions_of(events) == [Transmission.of([block])]


def test_is_text_marks_other_ids_as_runs_without_a_modality() -> None:
    token_ids = [TOY_IDS[Kind.ACT], *toy_encode("\n"), 5000, 5001, *toy_encode("\n")]
    parser = toy_parser(is_text=lambda i: i < 1000)
    events = feed_all(parser, [*token_ids, TOY_IDS[Kind.EOT]])
    (transmission,) = transmissions_of(events)
    assert transmission.blocks == (Block.of("act", TokenRun((5000, 5001))),)


def test_ctrl_and_caps_payloads_hold_text_only() -> None:
    token_ids = [TOY_IDS[Kind.CAPS], *toy_encode("\n{}"), 2001]
    with pytest.raises(ParseError, match="caps payload"):
        feed_all(toy_parser(side="runtime", modalities=MODALITIES), token_ids)


# -- UTF-8 ---------------------------------------------------------------------------------------


def test_a_character_split_across_ids_is_never_emitted_half() -> None:
    parser = toy_parser()
    parser.feed(TOY_IDS[Kind.OUT])
    events: list[Event] = []
    for token_id in toy_encode("\n🙂你\n"):
        events += parser.feed(token_id)
    texts = [e.text for e in events if isinstance(e, PayloadText)]
    assert texts == ["🙂", "你"]


def test_invalid_bytes_become_replacement_characters() -> None:
    token_ids = [TOY_IDS[Kind.OUT], 10, 0xFF, ord("a"), 0xF0, 0x9F, 10, TOY_IDS[Kind.EOT]]
    (transmission,) = transmissions_of(feed_all(toy_parser(), token_ids))
    # 0xFF is invalid at once; F0 9F is a tail cut off by the framing "\n" (invalid there too)
    assert transmission.blocks[0].text.startswith("\ufffda\ufffd")
    assert "\ufffd" not in transmission.blocks[0].text[4:].strip("\ufffd\n")


def test_bytes_decoder_holds_an_incomplete_tail_until_flush() -> None:
    decoder = BytesDecoder(TOY.__getitem__)
    emoji = "🙂".encode()
    assert [decoder.step(b) for b in emoji[:3]] == ["", "", ""]
    assert decoder.flush() == "\ufffd"
    # flush started a new piece: nothing of the old tail is left
    assert "".join(decoder.step(b) for b in emoji) == "🙂"
    decoder.step(emoji[0])
    decoder.reset()
    assert decoder.step(ord("x")) == "x"


def test_bytes_decoder_refuses_an_unknown_id() -> None:
    with pytest.raises(ValueError, match="no bytes"):
        BytesDecoder(TOY.__getitem__).step(99999)


# -- strict errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(RUNTIME_SIDE))
def test_a_runtime_side_id_in_model_output_is_refused(kind: Kind) -> None:
    token_ids = [TOY_IDS[Kind.THINK], *toy_encode("\nhm\n"), TOY_IDS[kind]]
    parser = toy_parser()
    with pytest.raises(ParseError) as caught:
        parser.feed(token_ids)
    assert caught.value.position == len(token_ids) - 1
    assert kind.text in str(caught.value)
    assert caught.value.events == (
        BlockStart(Kind.THINK),
        PayloadText(Kind.THINK, "h"),
        PayloadText(Kind.THINK, "m"),
    )
    with pytest.raises(ValueError, match="earlier error"):
        parser.feed(1)


@pytest.mark.parametrize("kind", sorted(MODEL_SIDE))
def test_a_model_side_id_in_a_runtime_stream_is_refused(kind: Kind) -> None:
    with pytest.raises(ParseError, match="runtime stream"):
        toy_parser(side="runtime").feed([TOY_IDS[Kind.USR], *toy_encode("\nx\n"), TOY_IDS[kind]])


def test_one_transmission_holds_one_side() -> None:
    token_ids = [TOY_IDS[Kind.USR], *toy_encode("\nx\n"), TOY_IDS[Kind.OUT]]
    with pytest.raises(ParseError, match="runtime transmission"):
        toy_parser(side="any").feed(token_ids)


@pytest.mark.parametrize("slot", [BOS, EOS, 12, 31])
def test_a_reserved_id_is_refused(slot: int) -> None:
    with pytest.raises(ParseError, match="reserved") as caught:
        toy_parser().feed([TOY_IDS[Kind.OUT], TOY_IDS[slot]])
    assert caught.value.position == 1


def test_payload_before_any_block_is_refused() -> None:
    with pytest.raises(ParseError, match="before any block start") as caught:
        toy_parser().feed(toy_encode("hi"))
    assert caught.value.position == 0
    with pytest.raises(ParseError, match="before any block start"):
        toy_parser(modalities=MODALITIES).feed([2001])


def test_the_newline_after_an_eot_is_not_payload_but_a_second_one_is() -> None:
    parser = toy_parser()
    parser.feed([TOY_IDS[Kind.OUT], TOY_IDS[Kind.EOT], *toy_encode("\n")])
    with pytest.raises(ParseError, match="before any block start"):
        parser.feed(toy_encode("\n"))


def test_an_empty_transmission_is_refused() -> None:
    with pytest.raises(ParseError, match="empty transmission") as caught:
        toy_parser().feed([TOY_IDS[Kind.OUT], TOY_IDS[Kind.EOT], TOY_IDS[Kind.EOT]])
    assert caught.value.transmission == 1
    assert caught.value.position == 2


def test_think_is_refused_when_reasoning_is_disabled() -> None:
    parser = toy_parser(reasoning=Reasoning("disabled"))
    with pytest.raises(ParseError, match="disabled"):
        parser.feed(TOY_IDS[Kind.THINK])
    # allowed otherwise
    assert toy_parser(reasoning=Reasoning("fixed")).feed(TOY_IDS[Kind.THINK])


def test_think_ids_past_max_tokens_are_refused() -> None:
    """Counted as the budget counts: every id after <|think|>, framing included, over all
    THINK blocks of one transmission."""
    think = [TOY_IDS[Kind.THINK], *toy_encode("\nab\n")]  # 4 payload ids
    parser = toy_parser(reasoning=Reasoning("fixed", max_tokens=6))
    parser.feed([*think, TOY_IDS[Kind.OUT], TOY_IDS[Kind.EOT]])  # 4: fine
    parser.feed([*think, *think[:3]])  # 4 + 2 = 6: fine
    with pytest.raises(ParseError, match=r"max_tokens \(6\)") as caught:
        parser.feed(think[3])
    assert caught.value.position == len(think) + 2 + len(think) + 3
    lenient = toy_parser(strict=False, reasoning=Reasoning("adaptive", max_tokens=0))
    events = feed_all(lenient, [*think, *think, TOY_IDS[Kind.EOT]])
    assert [e.position for e in events if isinstance(e, Violation)] == [1]
    assert transmissions_of(events) == [Transmission.of([Block.of("think", "ab")] * 2)]
    assert toy_parser(reasoning=Reasoning("fixed")).feed(think * 50)  # no limit


def test_a_ctrl_block_read_in_the_stream_sets_the_reasoning() -> None:
    conversation = [
        Transmission.of([Block.of("ctrl", {"reasoning": {"mode": "disabled"}})]),
        Transmission.of([Block.of("think", "no")]),
    ]
    with pytest.raises(ParseError, match="disabled") as caught:
        parse_ids(stream_ids(conversation, TOY_IDS, toy_encode), TOY_IDS, toy_decoder())
    assert caught.value.transmission == 1


def test_the_runtime_order_and_json_payloads_are_checked_at_eot() -> None:
    wrong_order = [Transmission.of([Block.of("usr", "x"), Block.of("sys", "y")])]
    with pytest.raises(ParseError, match="keeps the order"):
        parse_ids(stream_ids(wrong_order, TOY_IDS, toy_encode), TOY_IDS, toy_decoder())
    bad_caps = [Transmission.of([Block.of("caps", "not json")])]
    with pytest.raises(ParseError, match="caps payload must be a JSON object") as caught:
        parse_ids(stream_ids(bad_caps, TOY_IDS, toy_encode), TOY_IDS, toy_decoder())
    assert (caught.value.transmission, caught.value.block) == (0, 0)


def test_a_stream_that_ends_without_eot_is_refused() -> None:
    parser = toy_parser()
    parser.feed([TOY_IDS[Kind.OUT], *toy_encode("\nbye")])
    with pytest.raises(ParseError, match="no <\\|eot\\|>"):
        parser.finish()
    # after the EOT and its "\n", the end is fine
    parser = toy_parser()
    parser.feed([TOY_IDS[Kind.OUT], TOY_IDS[Kind.EOT], *toy_encode("\n")])
    assert parser.finish() == []


def test_smi_error_is_what_strict_raises() -> None:
    with pytest.raises(SmiError):
        toy_parser().feed(TOY_IDS[Kind.EOT])


def test_bad_side_is_api_misuse() -> None:
    with pytest.raises(ValueError, match="side"):
        toy_parser(side="both")


# -- lenient mode ----------------------------------------------------------------------------------


def test_lenient_reports_and_skips_what_strict_refuses() -> None:
    token_ids = [
        TOY_IDS[Kind.THINK],
        *toy_encode("\na"),
        TOY_IDS[Kind.SYS],  # skipped
        *toy_encode("b"),
        TOY_IDS[BOS],  # skipped
        *toy_encode("c\n"),
        TOY_IDS[Kind.EOT],
        TOY_IDS[Kind.EOT],  # an empty transmission
    ]
    events = feed_all(toy_parser(strict=False, reasoning=Reasoning("disabled")), token_ids)
    violations = [e for e in events if isinstance(e, Violation)]
    assert len(violations) == 3  # think while disabled, <|sys|>, <|bos|>
    assert violations[1].position == 3
    assert transmissions_of(events) == [
        Transmission.of([Block.of("think", "abc")]),
        Transmission(()),
    ]


def test_lenient_reads_text_before_a_block_as_an_implicit_out() -> None:
    token_ids = [
        *toy_encode("hello\n"),
        TOY_IDS[Kind.ACT],
        *toy_encode("\n{}\n"),
        TOY_IDS[Kind.EOT],
    ]
    events = feed_all(toy_parser(strict=False), token_ids)
    assert events[1] == BlockStart(Kind.OUT)
    assert transmissions_of(events) == [
        Transmission.of([Block.of("out", "hello"), Block.of("act", "{}")])
    ]
    runtime = feed_all(toy_parser(strict=False, side="runtime"), toy_encode("hi"))
    assert transmissions_of(runtime) == [Transmission.of([Block.of("usr", "hi")])]


def test_lenient_finish_closes_the_open_block_and_transmission() -> None:
    parser = toy_parser(strict=False)
    parser.feed([TOY_IDS[Kind.OUT], *toy_encode("\ncut off")])
    events = parser.finish()
    assert events == [
        BlockEnd(Block.of("out", "cut off")),
        EndOfTransmission(Transmission.of([Block.of("out", "cut off")])),
    ]


def test_lenient_reports_a_broken_runtime_rule_at_eot() -> None:
    """Lenient `check` leaves the authority order alone but still reads CAPS as JSON."""
    conversation = [
        Transmission.of([Block.of("out", "fine")]),
        Transmission.of([Block.of("usr", "x"), Block.of("caps", "not json")]),
    ]
    events = feed_all(
        toy_parser(strict=False, side="any"), stream_ids(conversation, TOY_IDS, toy_encode)
    )
    assert [e.message for e in events if isinstance(e, Violation)] == [
        "transmission 2, block 2: a caps payload must be a JSON object"
    ]
    assert transmissions_of(events) == conversation


# -- the grammar on its own ----------------------------------------------------------------------


def test_every_structural_id_leads_to_one_phase() -> None:
    assert set(NEXT) == set(Kind)
    assert {k for k, p in NEXT.items() if p is Phase.RUNTIME} == set(RUNTIME_SIDE)
    assert {k for k, p in NEXT.items() if p in (Phase.MODEL, Phase.THINK)} == set(MODEL_SIDE)
    assert (NEXT[Kind.EOT], NEXT[Kind.THINK]) == (Phase.BETWEEN, Phase.THINK)


def test_the_grammar_walks_a_conversation_and_refuses_without_moving() -> None:
    grammar = Grammar("any", None)
    phases = []
    for kind in (Kind.CTRL, Kind.USR, Kind.THINK, Kind.OUT, Kind.ACT):
        if kind is Kind.THINK:
            ctrl = Transmission.of([Block.of("ctrl", {"reasoning": {"max_tokens": 2}})])
            grammar.end(ctrl, strict=True)  # its <|eot|>: the limit applies from here
        assert grammar.admit(kind) is NEXT[kind]
        grammar.enter(kind)
        phases.append(grammar.phase)
    assert phases == [Phase.RUNTIME] * 2 + [Phase.THINK, Phase.MODEL, Phase.MODEL]
    with pytest.raises(Refused, match=r"^a runtime-side <\|obs\|> in a model transmission$"):
        grammar.admit(Kind.OBS)
    assert grammar.phase is Phase.MODEL  # a refusal changes nothing
    assert grammar.admit(Kind.EOT) is Phase.BETWEEN
    model_only = Grammar("model", None)
    with pytest.raises(Refused, match=r"^a runtime-side <\|usr\|> in a model stream$"):
        model_only.admit(Kind.USR)
    assert model_only.phase is Phase.BETWEEN


def test_the_grammar_counts_think_ids_per_transmission() -> None:
    grammar = Grammar("model", Reasoning("fixed", None, 2))
    grammar.enter(Kind.THINK)
    grammar.count_think()
    grammar.count_think()
    with pytest.raises(Refused, match=r"more than ctrl.reasoning.max_tokens \(2\) THINK ids"):
        grammar.count_think()
    grammar.count_think()  # reported once
    grammar.end(Transmission.of([Block.of("think", "x")]), strict=True)
    assert (grammar.phase, grammar.think_ids) == (Phase.BETWEEN, 0)
    with pytest.raises(Refused, match="no <\\|eot\\|>"):
        grammar.enter(Kind.OUT)
        grammar.finish(strict=True)
    grammar.finish(strict=False)
