"""`constrain`: a turn's llguidance grammar from its CAPS and CTRL, its mask over real
tokenizers (ByteLevel, GPT-NeoX, Llama, Metaspace, the RWKV trie), and its wiring in
`hf_runtime`."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from helpers.smi_runtime import tiny_model

from smllm.smi import assemble
from smllm.smi.assemble import hf_runtime
from smllm.smi.caps import Capabilities
from smllm.smi.compile import Compiler
from smllm.smi.constrain import Constrainer, GrammarConstraint, turn_grammar
from smllm.smi.stream import Block, Reasoning, Transmission
from smllm.smi.tokens import Kind, TokenIds
from smllm.smi.vocab.encode import PlainEncoder
from smllm.smi.vocab.trie import TrieEncoder

from .conftest import DECOY, build_installed

READ_FILE = {
    "name": "read_file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string", "maxLength": 16}},
        "required": ["path"],
        "additionalProperties": False,
    },
}
BASH = {
    "name": "bash",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"enum": ["ls", "pytest"]},
            "timeout": {"type": "integer", "minimum": 1, "maximum": 600},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}
TOOLS = Capabilities.from_value({"tools": [READ_FILE, BASH]})
CALL = {"id": "a1", "type": "tool", "name": "read_file", "arguments": {"path": "src/auth.py"}}
#: the families whose decoders join token bytes (WordPiece is refused: its own test)
BYTE_FAMILIES = ("bytelevel", "neox", "llama", "metaspace_first", "metaspace_always")


class Family:
    """A tokenizer of one family with the SMI tokens, its runtime's constrainer (built by
    `hf_runtime`, as a serving person gets it) and a compiler for model transmissions."""

    def __init__(self, family: str) -> None:
        installed = build_installed(family)
        self.tokenizer, self.ids = installed.tokenizer, installed.ids
        model = tiny_model("gpt2", vocab=len(self.tokenizer))
        self.runtime = hf_runtime(model, self.tokenizer)
        assert isinstance(self.runtime.constraint, Constrainer)
        self.constrainer: Constrainer = self.runtime.constraint
        self.encoder = PlainEncoder.from_tokenizer(self.tokenizer, self.ids)
        self.compiler = Compiler(self.encoder, self.ids)

    def turn(self, caps: Capabilities = TOOLS, reasoning: Reasoning | None = None) -> Any:
        return self.constrainer(SimpleNamespace(caps=caps, reasoning=reasoning))

    def model_ids(self, *blocks: Block) -> list[int]:
        """A model transmission as the compiler writes it, to its `<|eot|>` (the "\\n" after
        it is the runtime's)."""
        return until_eot(self.compiler.compile([Transmission.of(blocks)]).ids, self.ids)

    def act_ids(self, payload: str) -> list[int]:
        """`<|act|>` and a payload, framed, as ids."""
        return [self.ids[Kind.ACT], *self.encoder.encode(f"\n{payload}\n")]


def until_eot(ids: list[int], smi: TokenIds) -> list[int]:
    return ids[: ids.index(smi[Kind.EOT]) + 1]


def accepted(constraint: GrammarConstraint, ids: list[int], vocab: int) -> int:
    """How many of `ids` the grammar takes in a row (`allows`: the ids it can parse); at each
    step the mask `apply` leaves is not empty and holds only such ids (llguidance's mask may
    leave out a parseable id where it prefers the canonical tokenization of forced text; a
    mask of more than 500 ids is checked on 500 of them, drawn)."""
    for n, token in enumerate(ids):
        mask = sorted(allowed(constraint, vocab))
        drawn = mask if len(mask) <= 500 else random.Random(n).sample(mask, 500)
        assert mask and all(constraint.allows(i) for i in drawn), n
        if not constraint.allows(token):
            return n
        constraint.observe(token)
    return len(ids)


def allowed(constraint: GrammarConstraint, vocab: int) -> set[int]:
    """The ids `apply` leaves finite."""
    masked = constraint.apply(torch.zeros(vocab))
    return set(torch.nonzero(masked > float("-inf")).flatten().tolist())


@pytest.fixture(scope="module")
def bytelevel() -> Family:
    return Family("bytelevel")


def test_the_grammar_text() -> None:
    ids = TokenIds.contiguous(1000)
    caps = Capabilities.from_value({"tools": [BASH], "actions": ["grasp"]})
    grammar = turn_grammar(ids, caps, Reasoning("fixed", None, 8))
    compact = '"x-guidance": {"whitespace_flexible": false, "lenient": true}'
    bash = json.dumps(BASH["parameters"])[:-1] + ", " + compact + "}"
    anything = "{" + compact + "}"
    assert grammar.lark.splitlines() == [
        "start: block+ <[1009]>",
        "block: think | out | act",
        "out: <[1007]> TEXT",
        "TEXT: /(?s:.+)/",
        "think: <[1006]> think_text",
        "think_text[max_tokens=8]: /(?s:.+)/",
        'tool_0: "{\\"id\\":" ACT_ID ",\\"type\\":\\"tool\\",\\"name\\":\\"bash\\",'
        f'\\"arguments\\":" %json {bash} "}}"',
        'action: "{\\"id\\":" ACT_ID ",\\"type\\":\\"action\\",\\"name\\":" action_name '
        f'",\\"arguments\\":" %json {anything} "}}"',
        'action_name: "\\"grasp\\""',
        r"RAW: /[^{\s](?s:.*)/",
        'act: <[1008]> " "? "\\n"? call "\\n"?',
        "call: tool_0 | action | RAW",
        'ACT_ID: /"[A-Za-z0-9_.:-]{1,32}"/',
    ]
    assert grammar.warnings == ()
    none = turn_grammar(ids, Capabilities(), Reasoning("disabled"))
    assert none.lark.splitlines()[:2] == ["start: block+ <[1009]>", "block: out"]
    assert "act" not in none.lark and "think" not in none.lark


@pytest.mark.parametrize("family", BYTE_FAMILIES)
def test_the_compilers_turns_pass_on_each_family(family: str) -> None:
    """What the compiler writes for a model (THINK, OUT with a forged marker, a tool call,
    another call) is what the grammar takes, id for id, to the end."""
    f = Family(family)
    blocks = [
        Block.of("think", "The test compares seconds with milliseconds."),
        Block.of("out", "Reading it. <|eot|> is text here, as is <tool_call>."),
        Block.of("act", CALL),
        Block.of("act", {**CALL, "id": "a2", "name": "bash", "arguments": {"command": "ls"}}),
    ]
    ids = f.model_ids(*blocks)
    constraint = f.turn(TOOLS, Reasoning("adaptive", None, 64))
    assert accepted(constraint, ids, len(f.tokenizer)) == len(ids)
    assert constraint.error is None and constraint.yielded == 0
    assert not any(constraint.allows(i) for i in range(len(f.tokenizer)))  # the turn is over


def test_the_rwkv_trie() -> None:
    encoder = TrieEncoder()
    constrainer = Constrainer.for_trie(encoder)
    assert constrainer.vocab_size == encoder.vocab_size
    compiler = Compiler(encoder, encoder.ids)
    blocks = [Block.of("out", "Café 漢字 🙂 <|act|>"), Block.of("act", CALL)]
    ids = until_eot(compiler.compile([Transmission.of(blocks)]).ids, encoder.ids)
    constraint = constrainer.for_turn(TOOLS, None)
    first = constraint.apply(torch.zeros(encoder.vocab_size))
    opens = {encoder.ids[k] for k in (Kind.THINK, Kind.OUT, Kind.ACT)}
    assert set(torch.nonzero(first > float("-inf")).flatten().tolist()) == opens
    assert accepted(constraint, ids, encoder.vocab_size) == len(ids)
    outside = constrainer.for_turn(TOOLS, None)
    outside.observe(encoder.ids[Kind.OUT])
    assert not outside.allows(0)  # end-of-text: no bytes, never text
    assert not outside.allows(encoder.ids[Kind.SYS])


def test_only_declared_tools_with_valid_arguments(bytelevel: Family) -> None:
    vocab = len(bytelevel.tokenizer)
    good = bytelevel.act_ids(json.dumps(CALL, separators=(",", ":")))
    assert accepted(bytelevel.turn(), good, vocab) == len(good)
    wrong = [
        '{"id":"a1","type":"tool","name":"rm","arguments":{"path":"x"}}',  # undeclared
        '{"id":"a1","type":"tool","name":"bash","arguments":{"command":"rm"}}',  # enum
        '{"id":"a1","type":"tool","name":"bash","arguments":{"command":"ls","timeout":0}}',
        '{"id":"a1","type":"tool","name":"bash","arguments":{"timeout":5}}',  # required
        '{"id":"a1","type":"tool","name":"read_file","arguments":{"path":"x","mode":"w"}}',
        '{"id":"a1","type":"tool","name":"read_file","arguments":{"path":"0123456789abcdefg"}}',
        '{"id":"","type":"tool","name":"read_file","arguments":{"path":"x"}}',  # empty id
        '{"type":"tool","id":"a1","name":"read_file","arguments":{"path":"x"}}',  # key order
        '{"id":"a1","type":"tool","name":"read_file","arguments":{"path":"\\ud800"}}',
        '{"id": "a1", "type":"tool","name":"read_file","arguments":{"path":"x"}}',  # blank
        '{"id":"a1","type":"tool","name":"read_file","arguments":{"path": "x"}}',
        '{"id":"a1","type":"action","name":"read_file","arguments":{}}',  # no actions
        "grasp the cup",  # a raw action: none declared
    ]
    for payload in wrong:
        ids = bytelevel.act_ids(payload)
        assert accepted(bytelevel.turn(), ids, vocab) < len(ids), payload


def test_act_is_unsampleable_without_tools_or_actions(bytelevel: Family) -> None:
    act, out = bytelevel.ids[Kind.ACT], bytelevel.ids[Kind.OUT]
    vocab = len(bytelevel.tokenizer)
    bare = bytelevel.turn(Capabilities())
    assert allowed(bare, vocab) == {bytelevel.ids[Kind.THINK], out}
    bare.observe(out)
    bare.observe(bytelevel.encoder.encode("No tool can do that.")[0])
    assert act not in allowed(bare, vocab) and bytelevel.ids[Kind.EOT] in allowed(bare, vocab)
    assert act in allowed(bytelevel.turn(TOOLS), vocab)


def test_actions_allow_action_calls_and_raw_actions(bytelevel: Family) -> None:
    caps = Capabilities.from_value({"actions": ["grasp", "release"]})
    vocab = len(bytelevel.tokenizer)
    for payload in (
        '{"id":"g1","type":"action","name":"grasp","arguments":{"force":0.5}}',
        "move_to 0.2 0.4",
    ):
        ids = bytelevel.act_ids(payload)
        assert accepted(bytelevel.turn(caps), ids, vocab) == len(ids), payload
    for payload in (
        '{"id":"g1","type":"action","name":"throw","arguments":{}}',
        '{"id":"g1","type":"tool","name":"grasp","arguments":{}}',
    ):
        ids = bytelevel.act_ids(payload)
        assert accepted(bytelevel.turn(caps), ids, vocab) < len(ids), payload


def test_think_follows_the_reasoning(bytelevel: Family) -> None:
    think, out, act = (bytelevel.ids[k] for k in (Kind.THINK, Kind.OUT, Kind.ACT))
    vocab = len(bytelevel.tokenizer)
    for reasoning in (Reasoning("disabled"), Reasoning("adaptive", None, 0)):
        assert allowed(bytelevel.turn(TOOLS, reasoning), vocab) == {out, act}
    bounded = bytelevel.turn(TOOLS, Reasoning("fixed", None, 3))
    words = bytelevel.encoder.encode(" one two three four five")
    assert accepted(bounded, [think, *words], vocab) == 4  # <|think|> and 3 ids
    assert allowed(bounded, vocab) >= {out, act}
    assert not set(words) & allowed(bounded, vocab)


def test_markup_added_tokens_never_content_ones_always() -> None:
    """On GPT-NeoX's vocabulary: its whitespace-run tokens (content) are text the grammar
    takes; the decoy `<tool_call>` (markup, in the runtime's `forbid`) never is."""
    neox = Family("neox")
    runs = [i for t, i in neox.tokenizer.get_added_vocab().items() if set(t) == {" "}]
    decoy = neox.tokenizer.convert_tokens_to_ids(DECOY)
    assert len(runs) == 23 and decoy in neox.runtime.forbid
    assert not set(runs) & neox.runtime.forbid  # the vocabulary wing's rule: content
    constraint = neox.turn()
    constraint.observe(neox.ids[Kind.OUT])
    mask = allowed(constraint, len(neox.tokenizer))
    assert set(runs) <= mask and decoy not in mask
    indented = neox.model_ids(Block.of("out", "def f():\n        return  1"))
    assert set(indented) & set(runs)  # the compiler wrote whitespace runs: the grammar takes them
    assert accepted(neox.turn(), indented, len(neox.tokenizer)) == len(indented)


def test_the_mask_is_llguidances_exactly(bytelevel: Family) -> None:
    """At every step of a turn, `apply`'s finite ids are exactly the bits of llguidance's
    bitmask (read here the plain way), their logits untouched: dense masks (text: few
    forbidden, in place) and sparse ones (JSON: few allowed, a copy), cached or not."""
    vocab = len(bytelevel.tokenizer)
    ids = bytelevel.model_ids(Block.of("out", "Reading é漢🙂."), Block.of("act", CALL))
    copies = 0
    for _ in range(2):  # the second time every mask comes from the cache
        constraint = bytelevel.turn()
        for token in ids:
            bits = np.unpackbits(
                np.frombuffer(constraint._matcher.compute_bitmask(), dtype=np.uint8),
                bitorder="little",
            )
            logits = torch.randn(vocab)
            given = logits.clone()
            masked = constraint.apply(given)
            finite = {i for i in range(vocab) if masked[i] > float("-inf")}
            assert finite == {int(i) for i in np.flatnonzero(bits[:vocab])}
            assert all(masked[i] == logits[i] for i in finite)
            # a mask allowing most ids is applied in place, one allowing few on a copy
            assert (masked is given) == (2 * len(finite) > vocab)
            copies += masked is not given
            constraint.observe(token)
    assert 0 < copies < 2 * len(ids)


def test_the_budget_wins_where_nothing_is_left(bytelevel: Family) -> None:
    """Logits where every id the grammar allows is already -inf (the budget's): `apply`
    gives them back as they are, and the grammar takes up again at the next block id."""
    vocab = len(bytelevel.tokenizer)
    out, eot = bytelevel.ids[Kind.OUT], bytelevel.ids[Kind.EOT]
    constraint = bytelevel.turn()
    text = bytelevel.encoder.encode("Ж")  # two bytes, not in the corpus: one id each
    assert len(text) == 2
    constraint.observe(out)
    constraint.observe(text[0])  # mid-character: only continuation bytes may follow
    budget_only = torch.full((vocab,), float("-inf"))
    budget_only[out] = 0.0
    assert torch.equal(constraint.apply(budget_only.clone()), budget_only)
    assert constraint.yielded == 1 and constraint.allows(eot)  # stepped aside
    constraint.observe(out)
    assert constraint.yielded == 1 and not constraint.allows(eot)  # back: a block has text
    follow = bytelevel.encoder.encode("fine.")
    assert accepted(constraint, [*follow, eot], vocab) == len(follow) + 1
    # in text (a mask allowing most ids) where the budget left only an id the grammar forbids
    inside = bytelevel.turn()
    inside.observe(out)
    only_sys = torch.full((vocab,), float("-inf"))
    only_sys[bytelevel.ids[Kind.SYS]] = 0.0
    assert torch.equal(inside.apply(only_sys.clone()), only_sys) and inside.yielded == 1


def test_one_grammar_per_caps_and_reasoning(bytelevel: Family) -> None:
    constrainer = Constrainer.for_hf(
        bytelevel.tokenizer, bytelevel.ids, bytelevel.runtime.forbid, len(bytelevel.tokenizer)
    )
    again = Capabilities.from_value({"tools": [READ_FILE, BASH]})
    for caps in (TOOLS, again, TOOLS):
        constrainer.for_turn(caps, Reasoning("fixed", None, 4))
    assert constrainer.builds == 1
    constrainer.for_turn(TOOLS, Reasoning("fixed", None, 5))
    constrainer.for_turn(Capabilities(), Reasoning("fixed", None, 4))
    constrainer.for_turn(TOOLS, Reasoning("fixed", None, 4))
    assert constrainer.builds == 3


def test_single_tools_are_called_once_a_transmission_all_together(bytelevel: Family) -> None:
    """`single` (smllm run: the events, each answered with the next state): a transmission
    calls one of them at most, before, between or after any other blocks and calls; the other
    tools, as often as it likes. Without `single`, any number."""
    lark = turn_grammar(bytelevel.ids, TOOLS, None, lambda name: name == "bash").lark
    eot, act = bytelevel.ids[Kind.EOT], bytelevel.ids[Kind.ACT]
    assert lark.splitlines()[0] == f"start: (block+ | block* single block*) <[{eot}]>"
    assert f'single: <[{act}]> " "? "\\n"? single_call "\\n"?' in lark
    assert "single_call: tool_1" in lark.splitlines() and "call: tool_0" in lark.splitlines()
    single = Constrainer(bytelevel.constrainer.tokenizer, bytelevel.ids, lambda n: n == "bash")
    read = bytelevel.act_ids(json.dumps(CALL, separators=(",", ":")))
    bash = {"id": "b1", "type": "tool", "name": "bash", "arguments": {"command": "ls"}}
    run = bytelevel.act_ids(json.dumps(bash, separators=(",", ":")))
    again = bytelevel.act_ids(json.dumps({**bash, "id": "b2"}, separators=(",", ":")))
    vocab = len(bytelevel.tokenizer)
    for ids in ([*read, *run, *read, eot], [*run, eot], [*read, *read, eot]):
        turn = single.for_turn(TOOLS, None)
        assert accepted(turn, ids, vocab) == len(ids)
    second = [*run, *read, *again, eot]
    stops = accepted(single.for_turn(TOOLS, None), second, vocab)
    assert len(run) + len(read) < stops < len(run) + len(read) + len(again)
    assert accepted(bytelevel.turn(TOOLS), second, vocab) == len(second)


def test_a_schema_llguidance_cannot_compile_is_any_object(bytelevel: Family) -> None:
    odd = {"name": "odd", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}
    caps = Capabilities.from_value({"tools": [odd]})
    grammar = turn_grammar(bytelevel.ids, caps, None)
    assert len(grammar.warnings) == 1 and grammar.warnings[0].startswith("tool 'odd': arguments")
    ids = bytelevel.act_ids('{"id":"o1","type":"tool","name":"odd","arguments":{"b":[1]}}')
    constraint = bytelevel.turn(caps)
    assert constraint.warnings == grammar.warnings
    assert accepted(constraint, ids, len(bytelevel.tokenizer)) == len(ids)


@pytest.mark.parametrize("name", ['we"ird\\name', "読む", "two\nlines"])
def test_any_tool_or_action_name_is_spelt_exactly(bytelevel: Family, name: str) -> None:
    caps = Capabilities.from_value({"tools": [{"name": name}], "actions": [f"{name}!"]})
    for act in (
        {"id": "x1", "type": "tool", "name": name, "arguments": {}},
        {"id": "x2", "type": "action", "name": f"{name}!", "arguments": [1]},
    ):
        ids = bytelevel.act_ids(json.dumps(act, ensure_ascii=False, separators=(",", ":")))
        assert accepted(bytelevel.turn(caps), ids, len(bytelevel.tokenizer)) == len(ids)
    escaped = json.dumps({"id": "x3", "type": "tool", "name": name}, separators=(",", ":"))
    if escaped.isascii() and "\\u" in escaped:  # "\\u8aad…": another spelling, refused
        ids = bytelevel.act_ids(escaped[:-1] + ',"arguments":{}}')
        assert accepted(bytelevel.turn(caps), ids, len(bytelevel.tokenizer)) < len(ids)


def test_hf_runtime_turns_it_on_where_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = build_installed("bytelevel")
    model = tiny_model("gpt2", vocab=len(installed.tokenizer))
    assert isinstance(hf_runtime(model, installed.tokenizer).constraint, Constrainer)
    assert hf_runtime(model, installed.tokenizer, constrain=False).constraint is None
    wordpiece = build_installed("wordpiece")
    bert = tiny_model("gpt2", vocab=len(wordpiece.tokenizer))
    assert hf_runtime(bert, wordpiece.tokenizer).constraint is None  # off, not an error
    with pytest.raises(ValueError, match="joins tokens otherwise \\(WordPiece\\)"):
        hf_runtime(bert, wordpiece.tokenizer, constrain=True)
    # a token longer than llguidance takes (its trie panics past 1,024 bytes): off, or a
    # ValueError naming it, never a panic
    for size, refused in ((1024, False), (1025, True)):
        grown = build_installed("bytelevel")
        grown.tokenizer.add_tokens(["x" * size])
        big = tiny_model("gpt2", vocab=len(grown.tokenizer))
        automatic = hf_runtime(big, grown.tokenizer).constraint
        assert (automatic is None) == refused
        if refused:
            last = len(grown.tokenizer) - 1
            said = (
                "takes tokens of at most 1,024 bytes .llguidance's limit., "
                f"and id {last} is 1,025: pass constrain=False"
            )
            with pytest.raises(ValueError, match=said):
                hf_runtime(big, grown.tokenizer, constrain=True)
    monkeypatch.setattr(assemble, "available", lambda: False)  # llguidance not installed
    assert hf_runtime(model, installed.tokenizer).constraint is None
    with pytest.raises(ValueError, match="constrain=True needs llguidance, which is not"):
        hf_runtime(model, installed.tokenizer, constrain=True)
