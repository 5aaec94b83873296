"""audit: which naive encode paths let a payload reach an added token, and proof that the
PlainEncoder reaches none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers

from smllm.smi.tokens import BLOCK_SIZE, slot_text
from smllm.smi.vocab.audit import HF_PATHS, RAW_PATHS, audit, audit_trie
from smllm.smi.vocab.install import install_tokens
from smllm.smi.vocab.trie import TrieEncoder

SPLIT = "split_special_tokens=True"


def test_installed_fixtures(smi_tokenizer: Any, decoy: str) -> None:
    tok, ids = smi_tokenizer.tokenizer, smi_tokenizer.ids
    report = audit(tok)
    assert report.safe and report.plain_encoder_leaks == ()
    assert report.smi_ids == ids.ids
    assert report.paths == HF_PATHS
    by_text = {row.text: row for row in report.added}
    for slot in range(BLOCK_SIZE):
        row = by_text[slot_text(slot)]
        assert row.smi and row.special and not row.normalized and row.id == ids[slot]
        # specials reach a payload through every path but the split one
        assert row.leaks_through == ("default", "add_special_tokens=False", "backend")
    trap = by_text[decoy]
    assert not trap.smi and not trap.special
    assert trap.leaks_through == HF_PATHS  # the non-special decoy survives split_special_tokens
    assert [row.text for row in report.leaking(SPLIT)] == [decoy]
    assert len(report.added) == len(tok.added_tokens_decoder)


def test_to_json(smi_tokenizer: Any) -> None:
    report = audit(smi_tokenizer.tokenizer)
    data = json.loads(report.to_json())
    assert set(data) == {
        "tokenizer",
        "vocab_size",
        "smi_ids",
        "paths",
        "added",
        "plain_encoder_leaks",
        "would_install",
        "install_refusal",
        "literal_u2581",
        "safe",
    }
    assert data["safe"] is True and data["would_install"] is None
    assert data["vocab_size"] == len(smi_tokenizer.tokenizer)
    assert data["plain_encoder_leaks"] == []
    row = next(r for r in data["added"] if r["text"] == "<|act|>")
    assert row == {
        "id": smi_tokenizer.ids.ids[8],
        "text": "<|act|>",
        "special": True,
        "normalized": False,
        "smi": True,
        "leaks_through": ["default", "add_special_tokens=False", "backend"],
        "role": "markup",
        "reason": "an SMI token",
        "unsafe": None,
    }


def test_audit_changes_nothing(smi_tokenizer: Any) -> None:
    tok = smi_tokenizer.tokenizer
    before = (tok.backend_tokenizer.encode_special_tokens, tok.split_special_tokens, len(tok))
    audit(tok)
    after = (tok.backend_tokenizer.encode_special_tokens, tok.split_special_tokens, len(tok))
    assert after == before == (False, False, before[2])


def test_without_smi_tokens(any_tokenizer: Any, decoy: str) -> None:
    report = audit(any_tokenizer)
    assert report.smi_ids is None and report.safe
    assert not any(row.smi for row in report.added)
    assert [row.text for row in report.leaking(SPLIT)] == [decoy]


def test_lowercasing_normaliser_lets_an_upper_cased_decoy_through(wordpiece: Any) -> None:
    """BERT lowercases before matching normalised added tokens: `<TOOL_CALL>` is the decoy."""
    decoy_id = wordpiece.convert_tokens_to_ids("<tool_call>")
    assert decoy_id in wordpiece("<TOOL_CALL>", split_special_tokens=True).input_ids
    row = next(r for r in audit(wordpiece).added if r.id == decoy_id)
    assert SPLIT in row.leaks_through


def test_a_bare_backend(bytelevel: Any, decoy: str) -> None:
    raw = Tokenizer.from_str(bytelevel.backend_tokenizer.to_str())
    ids = install_tokens(raw)
    report = audit(raw)
    assert report.paths == RAW_PATHS and report.smi_ids == ids.ids and report.safe
    assert [row.text for row in report.leaking("encode_special_tokens=True")] == [decoy]
    assert raw.encode_special_tokens is False
    with pytest.raises(ValueError, match="not one of the audited paths"):
        report.leaking(SPLIT)


def test_a_vocabulary_that_spells_a_marker_is_reported_unsafe() -> None:
    """The proof can fail: a regular vocabulary entry equal to an added token's text is found
    by the model itself, so the PlainEncoder's check refuses it and the report lists it."""
    vocab = {"<unk>": 0, "a": 1, "b": 2, "<|eot|>": 3}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    raw.add_special_tokens([AddedToken("<|eot|>", special=True, normalized=False)])
    report = audit(raw)
    assert not report.safe
    assert any(
        "'a <|eot|> b' encoded to a forbidden id 3" in leak for leak in report.plain_encoder_leaks
    )


def test_every_family_of_look_alike_spellings_is_tried() -> None:
    """The proof tries each marker bare, glued into a word, spaced, twice, upper-cased, and
    (the SMI slots) title-cased and split by a zero-width space: a vocabulary that spells
    `<|eot|>` behind a lower-casing, control-dropping normaliser and a pre-tokenizer that cuts
    markers out of words leaks through every one of them, and each is listed."""
    vocab = {"<unk>": 0, "a": 1, "b": 2, "<|eot|>": 3}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.normalizer = normalizers.BertNormalizer(
        clean_text=True, lowercase=True, strip_accents=False, handle_chinese_chars=False
    )
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"<\|[a-z]+\|>"), "isolated"),
            pre_tokenizers.WhitespaceSplit(),
        ]
    )
    raw.add_special_tokens([AddedToken("<|eot|>", special=True, normalized=False)])
    report = audit(raw)
    assert not report.safe
    spellings = ["<|eot|>", "a<|eot|>b", "a <|eot|> b", "<|eot|>\n<|eot|>", "<|EOT|>"]
    # the added token's spellings, then the SMI slot's (the same text) and its two more
    expected = [*spellings, *spellings, "<|Eot|>", "<|e\u200bot|>"]
    assert [leak.split(" encoded to ")[0] for leak in report.plain_encoder_leaks] == [
        repr(text) for text in expected
    ]
    at = [leak.split(" at position ")[1].split(":")[0] for leak in report.plain_encoder_leaks]
    assert at == ["0", "1", "1", "0", "0", "0", "1", "1", "0", "0", "0", "0"]


def test_the_neox_split_and_why(neox: Any) -> None:
    report = audit(neox)
    rows = {row.text: (row.role, row.reason) for row in report.added}
    assert rows["  "] == ("content", "whitespace only")
    assert rows[" " * 24] == ("content", "whitespace only")
    assert rows["<|padding|>"] == ("markup", "special")
    assert sum(role == "content" for role, _ in rows.values()) == 23
    assert report.safe and report.plain_encoder_leaks == ()


def test_without_smi_tokens_it_says_what_install_would_add(neox: Any) -> None:
    report = audit(neox)
    assert report.smi_ids is None and report.install_refusal is None
    assert report.would_install == tuple(
        (slot_text(slot), len(neox) + slot) for slot in range(BLOCK_SIZE)
    )
    assert len(neox) == 824  # the copy took them, not the tokenizer


def test_an_added_token_holding_an_smi_text_is_flagged(bytelevel: Any) -> None:
    bytelevel.add_tokens([AddedToken("<|eot|>\n", special=False)])
    report = audit(bytelevel)
    (row,) = report.unsafe_tokens
    assert row.text == "<|eot|>\n" and row.role == "markup"
    assert row.unsafe == (
        "holds the SMI token text <|eot|> plus other text: a tokenizer would match it instead "
        "of <|eot|>"
    )
    assert not report.safe and report.plain_encoder_leaks == ()
    assert report.would_install is None
    assert report.install_refusal is not None
    assert report.install_refusal.startswith("the added token '<|eot|>\\n' (id 701) holds")


def test_the_rwkv_world_trie() -> None:
    report = audit_trie(TrieEncoder())
    assert report.safe and report.added == () and report.paths == ()
    assert report.smi_ids == tuple(range(65530, 65562)) and report.vocab_size == 65562
