"""install_tokens / find_tokens: the 32 SMI tokens appended as atomic special tokens, never
overwriting an id, idempotent, stable through save/reload, and a model's embeddings grown (never
shrunk) with the new rows at the old rows' mean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from smllm.smi.tokens import BLOCK_SIZE, TOKEN_TEXT, Kind, TokenIds, slot_text
from smllm.smi.vocab.install import find_tokens, install_tokens


def test_fresh_install_appends_a_contiguous_atomic_special_block(any_tokenizer: Any) -> None:
    tok = any_tokenizer
    base = len(tok)
    before = tok.get_vocab()
    ids = install_tokens(tok)
    assert ids == TokenIds.contiguous(base)
    assert len(tok) == base + BLOCK_SIZE
    after = tok.get_vocab()
    assert all(after[text] == i for text, i in before.items())  # no id moved
    for slot in range(BLOCK_SIZE):
        text = slot_text(slot)
        assert tok(text, add_special_tokens=False).input_ids == [ids[slot]]
        added = tok.added_tokens_decoder[ids[slot]]
        assert added.content == text
        assert added.special and not added.normalized
        assert not (added.lstrip or added.rstrip or added.single_word)
    # glued to text on both sides, still one id each
    got = tok("a<|usr|>b<|eot|>c", add_special_tokens=False).input_ids
    assert got.count(ids[Kind.USR]) == 1 and got.count(ids[Kind.EOT]) == 1


def test_install_is_idempotent_and_find_tokens_agrees(any_tokenizer: Any) -> None:
    ids = install_tokens(any_tokenizer)
    size = len(any_tokenizer)
    assert install_tokens(any_tokenizer) == ids
    assert len(any_tokenizer) == size
    assert find_tokens(any_tokenizer) == ids


def test_find_tokens_names_what_is_missing(bytelevel: Any) -> None:
    with pytest.raises(ValueError, match=r"<\|ctrl\|>.*missing"):
        find_tokens(bytelevel)


def test_a_slot_text_in_the_regular_vocabulary_is_refused() -> None:
    vocab = {"<unk>": 0, "hello": 1, "<|eot|>": 2}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    with pytest.raises(ValueError, match=r"<\|eot\|> is already a regular vocabulary token \(id 2"):
        install_tokens(raw)
    assert raw.get_vocab_size() == 3  # nothing appended


def test_an_existing_added_token_with_wrong_settings_is_refused(bytelevel: Any) -> None:
    bytelevel.add_tokens([AddedToken("<|usr|>", special=False)])
    with pytest.raises(ValueError, match=r"<\|usr\|>.*not special"):
        install_tokens(bytelevel)


def test_tokens_installed_before_keep_their_ids(metaspace_first: Any) -> None:
    """A tokenizer with the ten tokens already (as the reference installs them) keeps them."""
    tok = metaspace_first
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in TOKEN_TEXT], True)
    earlier = [tok.convert_tokens_to_ids(t) for t in TOKEN_TEXT]
    ids = install_tokens(tok)
    assert list(ids.ids[: len(Kind)]) == earlier
    assert ids.ids[len(Kind) :] == tuple(range(earlier[-1] + 1, earlier[-1] + 23))


def test_a_bare_tokenizers_tokenizer_works_too(bytelevel: Any) -> None:
    raw = Tokenizer.from_str(bytelevel.backend_tokenizer.to_str())
    base = raw.get_vocab_size(with_added_tokens=True)
    ids = install_tokens(raw)
    assert ids == TokenIds.contiguous(base) == find_tokens(raw)
    assert raw.encode("x<|act|>y", add_special_tokens=False).ids.count(ids[Kind.ACT]) == 1
    with pytest.raises(ValueError, match="sequence_tokens"):
        install_tokens(raw, sequence_tokens=True)


def test_a_tokenizer_that_pads_and_truncates_installs(bytelevel: Any) -> None:
    """Sentence-transformers' tokenizer.json files pad every encoding to a fixed length (the
    real all-MiniLM-L6-v2 one: 128): the check that each token is one id must not see the
    padding (it did, and refused every such tokenizer)."""
    raw = Tokenizer.from_str(bytelevel.backend_tokenizer.to_str())
    raw.enable_padding(length=16, pad_id=0, pad_token=raw.id_to_token(0))
    raw.enable_truncation(max_length=16)
    ids = install_tokens(raw)
    assert ids == find_tokens(raw)
    assert raw.encode("<|act|>").ids == [ids[Kind.ACT]] + [0] * 15  # the caller's settings kept


def test_install_leaves_the_callers_split_flag_alone(wordpiece: Any) -> None:
    wordpiece.backend_tokenizer.encode_special_tokens = True
    install_tokens(wordpiece)
    assert wordpiece.backend_tokenizer.encode_special_tokens is True


def test_sequence_tokens_are_the_blocks_bos_and_eos(any_tokenizer: Any) -> None:
    ids = install_tokens(any_tokenizer, sequence_tokens=True)
    assert any_tokenizer.bos_token == "<|bos|>" and any_tokenizer.bos_token_id == ids.bos
    assert any_tokenizer.eos_token == "<|eos|>" and any_tokenizer.eos_token_id == ids.eos


def _whole(ids: TokenIds) -> str:
    return "<|sys|>\nBe brief.\n<|usr|>\nCafé 漢字 🙂 <tool_call>\n<|eot|>\n<|out|>\nok\n<|eot|>\n"


def test_save_and_reload_keep_the_ids(any_tokenizer: Any, tmp_path: Path) -> None:
    ids = install_tokens(any_tokenizer, sequence_tokens=True)
    encoded = any_tokenizer(_whole(ids), add_special_tokens=False).input_ids
    any_tokenizer.save_pretrained(tmp_path)
    again = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert find_tokens(again) == ids
    assert install_tokens(again) == ids and len(again) == len(any_tokenizer)
    assert again(_whole(ids), add_special_tokens=False).input_ids == encoded
    assert again.bos_token_id == ids.bos and again.eos_token_id == ids.eos
    assert again.convert_tokens_to_ids("<tool_call>") == any_tokenizer.convert_tokens_to_ids(
        "<tool_call>"
    )


def _rows(model: Any) -> int:
    return int(model.get_input_embeddings().weight.shape[0])


def _mamba(vocab_size: int) -> Any:
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2, state_size=4
    )
    return transformers.MambaForCausalLM(config)


def test_a_mamba_model_grows_with_mean_rows_and_reloads(
    make_tokenizer: Any, tmp_path: Path
) -> None:
    tok = make_tokenizer("bytelevel")
    old_len = len(tok)
    model = _mamba(old_len)
    old = model.get_input_embeddings().weight.detach().clone()
    ids = install_tokens(tok, model)
    weight = model.get_input_embeddings().weight.detach()
    assert _rows(model) == len(tok) == old_len + BLOCK_SIZE
    assert model.config.vocab_size == len(tok)
    assert torch.equal(weight[:old_len], old)  # trained rows untouched
    mean = old.mean(dim=0)
    for i in ids.ids:
        assert torch.allclose(weight[i], mean)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # tied
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    tok2 = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    model2 = transformers.MambaForCausalLM.from_pretrained(tmp_path / "m")
    assert find_tokens(tok2) == ids
    assert torch.equal(model2.get_input_embeddings().weight, weight)
    # installing again into the reloaded pair changes nothing
    assert install_tokens(tok2, model2) == ids
    assert torch.equal(model2.get_input_embeddings().weight, weight)
    prompt = torch.tensor([tok2(_whole(ids), add_special_tokens=False).input_ids])
    assert model2(input_ids=prompt).logits.shape[-1] == len(tok2)


def _gpt2(vocab_size: int, tie: bool) -> Any:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=vocab_size,
        n_embd=16,
        n_layer=1,
        n_head=2,
        n_positions=128,
        tie_word_embeddings=tie,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


def test_a_padded_matrix_is_never_shrunk(make_tokenizer: Any) -> None:
    tok = make_tokenizer("metaspace_first")
    old_len = len(tok)
    padded = old_len + BLOCK_SIZE + 100  # the SMI ids land on padding rows
    model = _gpt2(padded, tie=False)
    old_in = model.get_input_embeddings().weight.detach().clone()
    old_out = model.get_output_embeddings().weight.detach().clone()
    ids = install_tokens(tok, model)
    new_in = model.get_input_embeddings().weight.detach()
    new_out = model.get_output_embeddings().weight.detach()
    assert _rows(model) == padded == model.config.vocab_size  # not len(tok)
    appended = list(ids.ids)
    others = [i for i in range(padded) if i not in set(appended)]
    assert torch.equal(new_in[others], old_in[others])
    assert torch.equal(new_out[others], old_out[others])
    for i in appended:
        assert torch.allclose(new_in[i], old_in[:old_len].mean(dim=0))
        assert torch.allclose(new_out[i], old_out[:old_len].mean(dim=0))  # untied: own mean


def test_a_matrix_padded_by_resize_grows_only_when_needed(
    make_tokenizer: Any, tmp_path: Path
) -> None:
    tok = make_tokenizer("wordpiece")
    model = _gpt2(len(tok), tie=True)
    model.resize_token_embeddings(len(tok), pad_to_multiple_of=64, mean_resizing=False)
    padded = _rows(model)
    assert padded % 64 == 0 and padded >= len(tok)
    ids = install_tokens(tok, model, sequence_tokens=True)
    rows = _rows(model)
    assert rows == max(padded, len(tok)) == model.config.vocab_size
    assert model.config.bos_token_id == ids.bos and model.config.eos_token_id == ids.eos
    assert model.generation_config.eos_token_id == ids.eos
    model.save_pretrained(tmp_path / "g")
    tok.save_pretrained(tmp_path / "g")
    again = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "g")
    tok2 = transformers.AutoTokenizer.from_pretrained(tmp_path / "g")
    assert _rows(again) == rows and find_tokens(tok2) == ids
    assert torch.equal(again.get_input_embeddings().weight, model.get_input_embeddings().weight)


def test_a_model_smaller_than_the_tokenizer_gets_mean_rows_for_every_new_row(
    make_tokenizer: Any,
) -> None:
    tok = make_tokenizer("bytelevel")
    ids = install_tokens(tok)  # tokenizer first, model later (e.g. a model built before)
    model = _gpt2(len(tok) - BLOCK_SIZE, tie=False)
    old = model.get_input_embeddings().weight.detach().clone()
    assert install_tokens(tok, model) == ids
    weight = model.get_input_embeddings().weight.detach()
    assert _rows(model) == len(tok)
    assert torch.allclose(weight[ids.ids[0] :], old.mean(dim=0).expand(BLOCK_SIZE, -1))
    assert torch.equal(weight[: ids.ids[0]], old)


@pytest.mark.parametrize("text", ["<|eot|>\n", "x<|act|>", " <|reserved_20|>"])
def test_an_added_token_holding_an_smi_text_plus_more_is_refused(bytelevel: Any, text: str) -> None:
    """The full tokenizer would match it instead of the SMI token: the rendered text and the
    compiled ids would disagree."""
    bytelevel.add_tokens([AddedToken(text, special=False)])
    token_id = bytelevel.convert_tokens_to_ids(text)
    inside = text.strip(" \nx")
    with pytest.raises(ValueError) as caught:
        install_tokens(bytelevel)
    assert str(caught.value) == (
        f"the added token {text!r} (id {token_id}) holds the SMI token text {inside} plus other "
        f"text: the tokenizer would match it instead of {inside}; remove it from the tokenizer "
        "before installing the SMI tokens"
    )
    assert len(bytelevel) == token_id + 1  # nothing was added


def test_an_added_token_that_is_an_smi_text_alone_is_not_refused(bytelevel: Any) -> None:
    bytelevel.add_tokens([AddedToken("<|eot|>", special=True, normalized=False)])
    assert install_tokens(bytelevel)[Kind.EOT] == bytelevel.convert_tokens_to_ids("<|eot|>")
