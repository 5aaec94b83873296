"""A literal `▁` (U+2581) in a payload: on a `▁` vocabulary with byte fallback it is encoded as
its byte tokens and comes back as `▁` (through the compiler, the parser's decoder and the
tokenizer's own decode); without byte fallback it reads as a space, and the encoder and the
audit say so."""

from __future__ import annotations

import pytest

from smllm.smi.compile import Compiler
from smllm.smi.parser import parse_ids
from smllm.smi.stream import Block, Transmission
from smllm.smi.tokens import Kind
from smllm.smi.vocab.audit import audit
from smllm.smi.vocab.decode import decoder_for
from smllm.smi.vocab.encode import PlainEncoder

from .conftest import build_installed

PAYLOADS = ["▁", "a▁b", "▁▁ x ▁", "def▁f(): ▁", "▁\ue000▁", "日本▁語 🙂"]


def _payload_back(family: str, payload: str) -> tuple[str, list[int], PlainEncoder]:
    installed = build_installed(family)
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    compiled = Compiler(encoder, installed.ids).compile(
        [Transmission.of([Block.of("usr", payload)])]
    )
    (transmission,) = parse_ids(compiled.ids, installed.ids, decoder_for(installed.tokenizer))
    (block,) = transmission.blocks
    return "".join(map(str, block.parts)), encoder.encode(payload), encoder


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_literal_u2581_round_trips_on_a_byte_fallback_vocabulary(payload: str) -> None:
    text, ids, encoder = _payload_back("llama", payload)
    assert encoder.literal_u2581 == "bytes"
    assert text == payload
    tokenizer = build_installed("llama").tokenizer
    marker = tokenizer.convert_tokens_to_ids(["<0xE2>", "<0x96>", "<0x81>"])
    assert _count(ids, marker) == payload.count("▁")
    assert encoder.decode(ids) == payload
    assert encoder.encode_batch([payload, "x"])[0] == ids


def _count(ids: list[int], run: list[int]) -> int:
    return sum(ids[n : n + len(run)] == run for n in range(len(ids)))


def test_text_without_u2581_is_encoded_as_the_tokenizer_does() -> None:
    installed = build_installed("llama")
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    text = "say hi \ue000 now"
    whole = installed.tokenizer("<|usr|>" + text, add_special_tokens=False).input_ids
    assert [installed.ids[Kind.USR], *encoder.encode(text)] == whole


@pytest.mark.parametrize("family", ["metaspace_first", "metaspace_always"])
def test_without_byte_fallback_it_reads_as_a_space_and_the_audit_says_so(family: str) -> None:
    text, ids, encoder = _payload_back(family, "a▁b")
    assert encoder.literal_u2581 == "space"
    assert ids == encoder.encode("a b")  # what the tokenizer makes of it: a space
    assert text == "a b"
    assert audit(build_installed(family).tokenizer).literal_u2581 == "space"


@pytest.mark.parametrize(("family", "expected"), [("llama", "bytes"), ("bytelevel", None)])
def test_the_audit_reports_what_a_literal_u2581_becomes(family: str, expected: str | None) -> None:
    assert audit(build_installed(family).tokenizer).literal_u2581 == expected
    if expected is None:  # bytes anyway: it round-trips with nothing special done
        text, _, _ = _payload_back(family, "a▁b")
        assert text == "a▁b"


def test_the_kinds_of_a_parse_are_the_payloads() -> None:
    installed = build_installed("llama")
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    ids = Compiler(encoder, installed.ids).compile(
        [Transmission.of([Block.of("usr", "▁"), Block.of("usr", "x")])]
    )
    assert [installed.ids.kind_of(i) for i in ids.ids if i in installed.ids.all] == [
        Kind.USR,
        Kind.USR,
        Kind.EOT,
    ]
