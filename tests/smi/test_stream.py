"""The stream model and the seed's rules (smllm.smi.stream, tokens): pure data, no tokenizer."""

from __future__ import annotations

import pytest

from smllm.smi.stream import (
    Block,
    SmiError,
    TokenRun,
    Transmission,
    canonical_json,
    check,
    parse_ctrl,
)
from smllm.smi.tokens import (
    BLOCK_SIZE,
    MODEL_SIDE,
    RUNTIME_SIDE,
    TOKEN_TEXT,
    Kind,
    TokenIds,
    slot_text,
)


def t(*blocks: tuple[str, object]) -> Transmission:
    return Transmission.of(Block.of(kind, payload) for kind, payload in blocks)


def test_the_ten_tokens_in_the_seeds_order() -> None:
    assert TOKEN_TEXT == (
        "<|ctrl|>",
        "<|sys|>",
        "<|dev|>",
        "<|caps|>",
        "<|usr|>",
        "<|obs|>",
        "<|think|>",
        "<|out|>",
        "<|act|>",
        "<|eot|>",
    )
    assert [int(k) for k in Kind] == list(range(10))
    assert set(Kind) - {Kind.EOT} == RUNTIME_SIDE | MODEL_SIDE
    assert not RUNTIME_SIDE & MODEL_SIDE


def test_the_reserved_block() -> None:
    assert BLOCK_SIZE == 32
    assert [slot_text(s) for s in (9, 10, 11, 12, 31)] == [
        "<|eot|>",
        "<|bos|>",
        "<|eos|>",
        "<|reserved_12|>",
        "<|reserved_31|>",
    ]
    assert len({slot_text(s) for s in range(32)}) == 32
    with pytest.raises(ValueError):
        slot_text(32)
    ids = TokenIds.contiguous(500)
    assert ids[Kind.CTRL] == 500 and ids[Kind.EOT] == 509 and ids.bos == 510 and ids.eos == 511
    assert ids.kind_of(504) is Kind.USR
    assert ids.kind_of(512) is None  # reserved: no kind
    assert ids.kind_of(499) is None
    assert ids.structural == frozenset(range(500, 510))
    assert ids.all == frozenset(range(500, 532))
    with pytest.raises(ValueError):
        TokenIds(tuple(range(31)))
    with pytest.raises(ValueError):
        TokenIds((1,) * 32)


def test_blocks_of_every_kind() -> None:
    assert Block.of("usr", "hi") == Block(Kind.USR, ("hi",))
    assert Block.of("usr", "") == Block(Kind.USR, ())
    assert Block.of("act", {"id": "a1", "é": 1}).text == '{"id":"a1","é":1}'
    run = TokenRun((5, 6), "image")
    mixed = Block.of(Kind.OBS, ["see ", run, "", " done"])
    assert mixed.parts == ("see ", run, " done")
    assert mixed.text == "see  done" and not mixed.is_text
    with pytest.raises(ValueError):
        Block.of("eot", "")
    with pytest.raises(ValueError):
        Block.of("image", "")
    with pytest.raises(ValueError):
        TokenRun((1, -2))
    with pytest.raises(ValueError):
        TokenRun((True,))  # type: ignore[arg-type]


def test_canonical_json() -> None:
    assert canonical_json({"b": 1, "a": ["x", "é"]}) == '{"b":1,"a":["x","é"]}'
    with pytest.raises(ValueError):
        canonical_json(float("nan"))


@pytest.mark.parametrize(
    "payload, message",
    [
        ("[]", "a ctrl payload must be a JSON object"),
        ("{", "a ctrl payload must be a JSON object"),
        ('{"reasoning": 1}', "ctrl.reasoning must be an object"),
        ('{"reasoning": {"mode": "deep"}}', "mode must be one of disabled, fixed, adaptive"),
        ('{"reasoning": {"mode": "fixed", "budget": 1}}', "unknown keys: budget"),
        ('{"reasoning": {"effort": ""}}', "effort must not be empty"),
        ('{"reasoning": {"effort": 2}}', "must be in [0, 1]"),
        ('{"reasoning": {"effort": true}}', "must be a string or a number"),
        ('{"reasoning": {"max_tokens": -1}}', "max_tokens must be a non-negative integer"),
        ('{"reasoning": {"max_tokens": 1.5}}', "max_tokens must be a non-negative integer"),
        ('{"reasoning": {"mode": "disabled", "max_tokens": 5}}', "allows no reasoning tokens"),
    ],
)
def test_ctrl_refusals(payload: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_ctrl(payload)
    assert message in str(caught.value)


def test_ctrl_accepted() -> None:
    ctrl = parse_ctrl(
        '{"reasoning": {"mode": "adaptive", "effort": "medium", "max_tokens": 8192}, '
        '"realtime": true}'
    )
    assert ctrl.reasoning is not None
    assert (ctrl.reasoning.mode, ctrl.reasoning.effort, ctrl.reasoning.max_tokens) == (
        "adaptive",
        "medium",
        8192,
    )
    assert ctrl.other == {"realtime": True}
    assert parse_ctrl('{"reasoning": {"effort": 0.3}}').reasoning.effort == 0.3  # type: ignore[union-attr]
    assert parse_ctrl('{"reasoning": {"effort": "extreme"}}').reasoning is not None
    assert parse_ctrl("{}").reasoning is None


SEED_CODING = [
    t(
        ("ctrl", {"reasoning": {"mode": "adaptive", "effort": "high", "max_tokens": 8192}}),
        ("sys", "You are a secure autonomous coding agent."),
        ("dev", "Inspect code before modifying it."),
        ("caps", {"tools": [{"name": "read_file", "parameters": {}}]}),
        ("usr", "Fix the failing authentication test."),
    ),
    t(("think", "I need to inspect."), ("act", {"id": "a1"}), ("act", {"id": "a2"})),
    t(("obs", {"caused_by": "a2", "ok": True}), ("obs", {"caused_by": "a1", "ok": True})),
    t(("out", "Fixed.")),
]


def test_the_seeds_coding_session_passes() -> None:
    reasoning = check(SEED_CODING)
    assert reasoning is not None and reasoning.max_tokens == 8192


def test_runtime_transmissions_in_a_row_and_usr_then_obs() -> None:
    check([t(("usr", "a"), ("usr", "b")), t(("obs", "x")), t(("usr", "interrupt"))])
    check([t(("usr", "pick up the cup"), ("obs", "[vision]"))])  # the seed's embodied example


@pytest.mark.parametrize(
    "conversation, message",
    [
        ([Transmission(())], "transmission 1: an empty transmission"),
        ([t(("usr", "x"), ("out", "y"))], "runtime and model blocks mixed"),
        ([t(("usr", "x"), ("sys", "y"))], "block 2: a sys block after a usr block"),
        ([t(("obs", "x"), ("ctrl", "{}"))], "a ctrl block after a obs block"),
        ([t(("ctrl", "[1]"))], "a ctrl payload must be a JSON object"),
        ([t(("caps", "tools"))], "a caps payload must be a JSON object"),
        (
            [t(("caps", [TokenRun((1,))]))],
            "a caps payload is JSON text, not tokens",
        ),
        (
            [t(("ctrl", {"reasoning": {"mode": "disabled"}}), ("usr", "q")), t(("think", "hm"))],
            "transmission 2, block 1: a think block while ctrl.reasoning.mode is disabled",
        ),
    ],
)
def test_rules_broken(conversation: list[Transmission], message: str) -> None:
    with pytest.raises(SmiError) as caught:
        check(conversation)
    assert message in str(caught.value)


def test_lenient_mode() -> None:
    check([Transmission(()), t(("usr", "x"), ("sys", "y"))], strict=False)
    with pytest.raises(SmiError):  # mixing sides is never a lenient matter
        check([t(("usr", "x"), ("out", "y"))], strict=False)


def test_a_later_ctrl_changes_the_reasoning() -> None:
    conversation = [
        t(("ctrl", {"reasoning": {"mode": "disabled"}}), ("usr", "q")),
        t(("out", "a")),
        t(("ctrl", {"reasoning": {"mode": "fixed", "max_tokens": 10}}), ("usr", "think now")),
        t(("think", "ok")),
    ]
    reasoning = check(conversation)
    assert reasoning is not None and reasoning.mode == "fixed"
