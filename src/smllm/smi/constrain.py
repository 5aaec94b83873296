"""Constrained decoding for the model's transmission: one llguidance grammar per turn, built
from the turn's CAPS and CTRL, whose token mask is combined with the budget's (seed 003: "the
runtime SHOULD use constrained decoding"). Under it a model can only open blocks the seed
allows, call declared tools with schema-valid arguments, and end with `<|eot|>`; the budget
stays the hard limit and the runtime's post-generation checks (`caps.check_act`, the parser)
stay as they are: the runtime still never trusts the model.

The grammar (llguidance's Lark, smi-notes §4.4; structural ids as `<[id]>`, never `<|name|>`,
which only works where the tokenizer marks the token special):

    start: block+ <[eot]>                 (with `single` tools: block+ | block* single block*)
    block: think | out | act              (think and act only where allowed, below)
    think: <[think]> think_text           think_text[max_tokens=N]: /(?s:.+)/
    out:   <[out]> TEXT                   TEXT: /(?s:.+)/
    act:   <[act]> " "? "\\n"? call "\\n"?
    call:  tool_0 | tool_1 | … | action | RAW

- Text is any non-empty UTF-8 (so a payload never ends mid-character); byte-level terminals
  can never produce a special id, so forged markers in text stay text. THINK is left out when
  `reasoning.mode` is disabled or `max_tokens` is 0; otherwise each THINK block's text is one
  lexeme bounded by `max_tokens` ids (the budget bounds all THINK blocks of the turn together,
  as the parser counts them; blocks may come in any order, as the parser allows).
- A tool call is exactly the seed's ACT object, keys in its order:
  `{"id":ID,"type":"tool","name":NAME,"arguments":ARGS}` with NAME a declared tool's name and
  ARGS `%json` of that tool's `parameters` (its own root, so its `$ref`s resolve as written),
  compact (no whitespace: the canonical JSON), keywords llguidance doesn't implement
  ignored (`lenient`: the post-check still applies them); `\\u` escapes only for control
  characters (llguidance's default: no lone surrogate, which `parse_act` refuses); a schema
  llguidance can't compile at all becomes any object, noted in `warnings`.
  ID is `"` + 1-32 of `[A-Za-z0-9_.:-]` + `"` (the seed's `a1`; bounded, so sampling ends).
- `type: "action"` calls (`{"id":ID,"type":"action","name":NAME,"arguments":ANY}`, NAME a
  declared action) and raw actions (text whose first character is neither `{` nor blank) are
  allowed only where CAPS declares `actions`. Raw actions made of other-modality token runs
  can't be expressed (runs have no bytes): a runtime whose model emits action tokens turns the
  constraint off.
- `single` (a predicate on tool names; `smllm run`: the events, since the driver answers each
  with the next state and refuses a second one in a transmission): those tools' calls go in a
  `single` ACT that a transmission may hold once, anywhere among its other blocks; the other
  tools are called as often as the model likes. After a budget restart (below) the count
  starts afresh: the driver's policy still refuses a second event.
- **No tools and no actions: no `act` alternative at all**, so `<|act|>` is unsampleable (an
  ACT would be refused as `unknown_capability` anyway; the model says what it can't do in OUT).
- The framing `"\\n"` around an ACT's JSON is optional (a vocabulary without a `"\\n"` token
  can still call), and so is one space before it (a Metaspace "always" vocabulary begins every
  piece with `▁`, which its decoder drops); the parser strips the framing, `parse_act` blanks.

What it can't express (the post-checks catch them; the model loses only that ACT): an id
already used in the session (`duplicate_id`), nesting past `caps.MAX_DEPTH` in a schema that
allows any depth, keywords llguidance ignores. A turn cut by `max_new_tokens` mid-ACT is the
runtime's cut, not the grammar's (keep `max_new_tokens` ample and schemas bounded).

Where grammar and budget disagree (the budget cuts THINK where the grammar wanted more bytes of
a character), the combined mask would be empty: the budget wins (it is the hard limit), the
constraint steps aside for that id (`yielded` counts it) and takes up again at the next block
id (the grammar is the same at every block boundary, so a fresh matcher there is exact).

Tokenizers: the llguidance tokenizer is built from each id's bytes, as the parser's decoder
reads them (`vocab.decode.token_bytes_of`: so what the grammar matched is what the parser
reads), with exactly the SMI block and the runtime's `forbid` ids (the vocabulary wing's
*markup*, `vocab/added.py`) special: a content added token (GPT-NeoX's whitespace runs) is
text the grammar can match, a markup one (`<tool_call>`) never is. HF fast tokenizers
(ByteLevel, the `▁` family with or without byte fallback) and the RWKV trie
(`vocab.trie.TrieEncoder.token_bytes`); a WordPiece vocabulary is refused: its decoder joins
words with spaces, so token bytes don't add up to the decoded text. llguidance's EOS is the
reserved `<|eos|>` slot (the budget always forbids it), so `<|eot|>` is an ordinary special
id of the grammar. Building a tokenizer takes ~0.1 s at 65k ids, a grammar a few ms:
`Constrainer` keeps one tokenizer and a compiled matcher per (caps, reasoning), deep-copied
per turn, and each distinct mask's sparse side (a few masks make up most steps).

`hf_runtime(..., constrain=…)` wires it: on by default where llguidance is installed (and the
vocabulary isn't WordPiece), `constrain=False` turns it off, `constrain=True` without
llguidance is an error.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .caps import Capabilities
from .stream import Reasoning
from .tokens import Kind, TokenIds

if TYPE_CHECKING:
    from .vocab.encode import PlainEncoder

__all__ = [
    "ACT_ID_PATTERN",
    "Constrainer",
    "GrammarConstraint",
    "TurnGrammar",
    "available",
    "hf_token_bytes",
    "lltokenizer",
    "turn_grammar",
]

#: the ACT ids the grammar lets a model write (a JSON string's inside)
ACT_ID_PATTERN = "[A-Za-z0-9_.:-]{1,32}"
_JSON_OPTIONS = {"whitespace_flexible": False, "lenient": True}
#: masks kept (their sparse sides as index arrays) per Constrainer
_MASKS_KEPT = 512
#: compiled matchers kept per Constrainer (one per distinct caps and reasoning)
_CACHE_SIZE = 64


def available() -> bool:
    """Whether llguidance can be imported (the `smllm[smi]` extra)."""
    try:
        import llguidance  # noqa: F401
    except ImportError:
        return False
    return True


# -- the grammar -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnGrammar:
    """One turn's grammar: its Lark text, and what it had to loosen (a tool schema llguidance
    can't compile, read as any object)."""

    lark: str
    warnings: tuple[str, ...] = ()


def _lit(text: str) -> str:
    """A Lark string literal matching `text` exactly."""
    return json.dumps(text)


def _schema_json(schema: Any) -> str:
    """A schema for `%json`, compact and lenient (the schema's own `x-guidance` keys give
    way to those two)."""
    value = dict(schema) if isinstance(schema, dict) else {}
    value["x-guidance"] = {**dict(value.get("x-guidance") or {}), **_JSON_OPTIONS}
    return json.dumps(value, ensure_ascii=False)


def _compiles(schema_json: str) -> str | None:
    """None if llguidance compiles `%json` of this schema; else its error."""
    from llguidance import LLMatcher

    grammar = LLMatcher.grammar_from_lark(f"start: %json {schema_json}")
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    return messages[0] if is_error else None


def turn_grammar(
    ids: TokenIds,
    caps: Capabilities,
    reasoning: Reasoning | None,
    single: Callable[[str], bool] | None = None,
) -> TurnGrammar:
    """The grammar of a model transmission under `caps` and `reasoning` (module docstring)."""

    def token(kind: Kind) -> str:
        return f"<[{ids[kind]}]>"

    warnings: list[str] = []
    blocks = ["out"]
    rules = [f"out: {token(Kind.OUT)} TEXT", "TEXT: /(?s:.+)/"]
    limit = None if reasoning is None else reasoning.max_tokens
    if not (reasoning is not None and (reasoning.mode == "disabled" or limit == 0)):
        blocks.insert(0, "think")
        bound = "" if limit is None else f"[max_tokens={limit}]"
        rules += [f"think: {token(Kind.THINK)} think_text", f"think_text{bound}: /(?s:.+)/"]
    calls: list[str] = []
    singles: list[str] = []  # the tools of which a transmission calls one at most (`single`)
    for n, tool in enumerate(caps.tools):
        schema = _schema_json(tool.parameters)
        problem = _compiles(schema)
        if problem is not None:
            warnings.append(f"tool {tool.name!r}: arguments read as any object ({problem})")
            schema = _schema_json({"type": "object"})
        head = f',"type":"tool","name":{json.dumps(tool.name, ensure_ascii=False)},"arguments":'
        (singles if single is not None and single(tool.name) else calls).append(f"tool_{n}")
        rules.append(f'tool_{n}: "{{\\"id\\":" ACT_ID {_lit(head)} %json {schema} "}}"')
    if caps.actions:
        names = " | ".join(_lit(json.dumps(a, ensure_ascii=False)) for a in caps.actions)
        calls += ["action", "RAW"]
        rules += [
            f'action: "{{\\"id\\":" ACT_ID ",\\"type\\":\\"action\\",\\"name\\":" action_name '
            f'",\\"arguments\\":" %json {_schema_json({})} "}}"',
            f"action_name: {names}",
            r"RAW: /[^{\s](?s:.*)/",
        ]
    framing = f'{token(Kind.ACT)} " "? "\\n"?'
    if calls:
        blocks.append("act")
        rules += [f'act: {framing} call "\\n"?', f"call: {' | '.join(calls)}"]
    if calls or singles:
        rules.append(f'ACT_ID: /"{ACT_ID_PATTERN}"/')
    head_rules = [f"start: block+ {token(Kind.EOT)}", f"block: {' | '.join(blocks)}"]
    if singles:
        head_rules[0] = f"start: (block+ | block* single block*) {token(Kind.EOT)}"
        rules += [f'single: {framing} single_call "\\n"?', f"single_call: {' | '.join(singles)}"]
    return TurnGrammar("\n".join(head_rules + rules) + "\n", tuple(warnings))


# -- tokenizers ------------------------------------------------------------------------------


#: the longest token llguidance's tokenizer takes, in bytes
LONGEST_TOKEN = 1024


class TokenTooLong(ValueError):
    """A vocabulary with a token longer than llguidance takes (LONGEST_TOKEN)."""


def lltokenizer(
    token_bytes: Sequence[bytes | None],
    special: Iterable[int],
    eos: int,
    encode: Callable[[bytes], list[int]],
) -> Any:
    """An `llguidance.LLTokenizer` over `token_bytes` (id → bytes; None: an id with no text,
    made special), with exactly `special` (and the byteless ids) special. `encode` tokenizes
    bytes: llguidance reads the ids it gives as the canonical tokenization of forced text, so
    where they don't spell the bytes back (a Metaspace "always" encoder puts a `▁` first)
    llguidance's own greedy tokenization is used instead."""
    from llguidance import LLTokenizer, TokenizerWrapper

    marked = {int(i) for i in special} | {i for i, b in enumerate(token_bytes) if b is None}
    tokens = [
        f"<[{i}]>".encode() if b is None or i in marked else b for i, b in enumerate(token_bytes)
    ]
    longest = max(range(len(tokens)), key=lambda i: len(tokens[i]), default=None)
    if longest is not None and len(tokens[longest]) > LONGEST_TOKEN:
        # llguidance's token trie panics (a Rust assertion, not an exception) past this
        raise TokenTooLong(
            f"constrained decoding takes tokens of at most {LONGEST_TOKEN:,} bytes (llguidance's "
            f"limit), and id {longest} is {len(tokens[longest]):,}: pass constrain=False"
        )
    built: list[Any] = []

    def faithful(data: bytes | str) -> list[int]:
        data = data.encode("utf-8") if isinstance(data, str) else data
        ids = encode(data)
        if not built or b"".join(tokens[i] for i in ids if i < len(tokens)) == data:
            return ids
        return list(built[0].greedy_tokenize(data.decode("utf-8", errors="replace")))

    class _Vocabulary:
        def __init__(self) -> None:
            self.tokens = tokens
            self.special_token_ids = sorted(i for i in marked if i < len(tokens))
            self.eos_token_id = eos
            self.bos_token_id = None

        def __call__(self, data: bytes | str) -> list[int]:
            return faithful(data)

    built.append(LLTokenizer(TokenizerWrapper(_Vocabulary()), n_vocab=len(tokens)))
    return built[0]


def hf_token_bytes(
    tokenizer: Any, vocab_size: int, token_bytes: Callable[[int], bytes] | None = None
) -> list[bytes | None]:
    """Each id's bytes in an HF fast tokenizer, as the parser's decoder reads them
    (`vocab.decode.token_bytes_of`, or `token_bytes` when the caller has it already); ids past
    the tokenizer (padded embedding rows): None. Refuses a vocabulary whose decoder doesn't
    read each token on its own (WordPiece joins words with spaces): its token bytes don't add
    up to the text."""
    from .vocab.decode import token_bytes_of
    from .vocab.install import backend_of

    if token_bytes is None:
        token_bytes = token_bytes_of(tokenizer)
    if token_bytes is None:
        raise ValueError(
            "constrained decoding needs a vocabulary whose tokens' bytes add up to the text "
            "(ByteLevel, the ▁ family, the RWKV trie); this tokenizer's decoder joins tokens "
            "otherwise (WordPiece): pass constrain=False"
        )
    size = backend_of(tokenizer).get_vocab_size(with_added_tokens=True)
    return [token_bytes(i) if i < size else None for i in range(vocab_size)]


# -- one turn --------------------------------------------------------------------------------


def _ids_of(words: Any, vocab: int) -> Any:
    """The ids whose bits are set in a little-endian bitmask of 32-bit words, below `vocab`
    (an int64 numpy array): only the non-zero words are unpacked."""
    import numpy as np

    nonzero = np.nonzero(words != 0)[0]  # (faster than flatnonzero on uint32)
    bits = np.flatnonzero(np.unpackbits(words[nonzero].view(np.uint8), bitorder="little"))
    ids = nonzero[bits >> 5] * 32 + (bits & 31)
    return ids if not ids.size or ids[-1] < vocab else ids[ids < vocab]


class GrammarConstraint:
    """One turn's constraint (the runtime's `TurnConstraint`): `apply` masks the budget-masked
    logits with the grammar's next-id mask, `observe` advances on the sampled id, `allows`
    checks an id without advancing. `yielded` counts the ids at which the grammar gave way to
    the budget (module docstring)."""

    def __init__(
        self,
        matcher: Any,
        restart: Callable[[], Any],
        ids: TokenIds,
        vocab_size: int,
        masks: dict[tuple[bytes, int], tuple[bool, Any]] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        self._matcher = matcher
        #: what the turn's grammar had to loosen (`TurnGrammar.warnings`)
        self.warnings = warnings
        self._covered = 32 * ((vocab_size + 31) // 32)  # ids the grammar's masks cover
        self._masks = {} if masks is None else masks
        self._restart = restart
        self._opens = frozenset({ids[Kind.THINK], ids[Kind.OUT], ids[Kind.ACT]})
        self._lost = False
        self.yielded = 0

    def apply(self, logits: Any) -> Any:
        """`logits` with every id the grammar forbids at -inf (in place where they are float
        CPU logits and the grammar forbids few ids, else a copy); `logits` unchanged (the
        budget's mask alone) where the grammar would leave nothing (module docstring)."""
        import numpy as np
        import torch

        if self._lost or self._matcher.is_stopped():
            return logits
        # numpy on the CPU: a torch op on one row costs several us of dispatch each
        on_host = logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64)
        host = logits.detach() if on_host else logits.detach().to("cpu", torch.float32)
        values = host.numpy()
        dense, listed = self._listed(self._matcher.compute_bitmask(), values.shape[-1])
        if dense:  # in place, the listed values (and any past the grammar's) kept to undo
            kept, tail = values[listed], values[self._covered :].copy()
            values[listed] = -np.inf
            values[self._covered :] = -np.inf
            if values.max() != -np.inf:
                return logits if on_host else host.to(logits.device, logits.dtype)
            values[listed], values[self._covered :] = kept, tail
        else:
            kept = values[listed]
            if kept.size and kept.max() != -np.inf:
                masked = np.full_like(values, -np.inf)
                masked[listed] = kept
                return torch.from_numpy(masked).to(logits.device, logits.dtype)
        self._lost = True  # the budget forbids all the grammar allows: the budget wins
        self.yielded += 1
        return logits

    def _listed(self, mask: bytes, vocab: int) -> tuple[bool, Any]:
        """Whether `mask` is dense, and the ids on its sparse side (forbidden ones if dense,
        allowed ones if not) as a numpy index array; cached per mask, since a few masks (any
        text, a JSON string's inside) make up most steps."""
        key = (mask, vocab)
        found = self._masks.get(key)
        if found is not None:
            return found
        import numpy as np

        # llguidance's mask: little-endian 32-bit words, id i at bit i % 32 of word i // 32.
        # A mask is either sparse (JSON: a few ids allowed) or dense (text: a few forbidden),
        # so only the ids on the sparse side are listed, word by word
        words = np.frombuffer(mask, dtype=np.uint32)
        holes = ~words
        dense = bool(np.count_nonzero(holes) < np.count_nonzero(words))
        found = (dense, _ids_of(holes if dense else words, vocab))
        if len(self._masks) >= _MASKS_KEPT:
            self._masks.clear()
        self._masks[key] = found
        return found

    def observe(self, token_id: int) -> None:
        token_id = int(token_id)
        if self._lost:
            if token_id in self._opens:  # a block boundary: the grammar takes up again
                self._matcher = self._restart()
                self._lost = not self._matcher.consume_token(token_id)
            return
        if not self._matcher.consume_token(token_id):
            self._lost = True  # an id the grammar didn't allow (the budget's or a caller's)
            self.yielded += 1

    def allows(self, token_id: int) -> bool:
        if self._lost:
            return True
        return bool(self._matcher.validate_tokens([int(token_id)]) == 1)

    @property
    def error(self) -> str | None:
        """llguidance's error once the matcher is in one (None while it is fine)."""
        return str(self._matcher.get_error()) if self._matcher.is_error() else None


# -- the factory -----------------------------------------------------------------------------


class Constrainer:
    """Makes each turn's `GrammarConstraint` (the runtime's `constraint=` factory: called with
    the session, it reads `session.caps` and `session.reasoning`). Holds one llguidance
    tokenizer and a compiled matcher per distinct (caps, reasoning), copied per turn. `single`:
    the tools of which a transmission may call one at most, all of them together (a driver that
    answers each event with the next state: turn_grammar)."""

    def __init__(
        self, tokenizer: Any, ids: TokenIds, single: Callable[[str], bool] | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.ids = ids
        self.single = single
        self.vocab_size = int(tokenizer.vocab_size)
        self._compiled: OrderedDict[
            tuple[str, str | None, int | None], tuple[Any, tuple[str, ...]]
        ] = OrderedDict()
        self._masks: dict[tuple[bytes, int], tuple[bool, Any]] = {}
        #: grammars compiled so far (a turn whose caps and reasoning were seen compiles none)
        self.builds = 0

    @classmethod
    def for_hf(
        cls,
        tokenizer: Any,
        ids: TokenIds,
        markup: Iterable[int],
        vocab_size: int,
        *,
        encoder: PlainEncoder | None = None,
        token_bytes: Callable[[int], bytes] | None = None,
        single: Callable[[str], bool] | None = None,
    ) -> Constrainer:
        """Over an HF fast tokenizer with the SMI tokens; `markup`: the ids the model may never
        write as text (the runtime's `forbid`), `vocab_size`: the model's logits' length;
        `encoder`, `token_bytes`: the runtime's own, when it has them (built once)."""
        from .vocab.encode import PlainEncoder

        listed = hf_token_bytes(tokenizer, vocab_size, token_bytes)
        if encoder is None:
            encoder = PlainEncoder.from_tokenizer(tokenizer, ids)
        plain = encoder
        special = set(markup) | set(ids.all)

        def encode(data: bytes) -> list[int]:
            return plain.encode(data.decode("utf-8", errors="replace"), "forced text")

        return cls(lltokenizer(listed, special, ids.eos, encode), ids, single)

    @classmethod
    def for_trie(cls, encoder: Any, vocab_size: int | None = None) -> Constrainer:
        """Over the RWKV world vocabulary (`vocab.trie.TrieEncoder`)."""
        size = max(vocab_size or 0, encoder.vocab_size)
        token_bytes: list[bytes | None] = []
        for i in range(size):
            try:
                token_bytes.append(None if i in encoder.forbidden else encoder.token_bytes(i))
            except ValueError:
                token_bytes.append(None)
        tokenizer = lltokenizer(
            token_bytes, encoder.forbidden, encoder.ids.eos, encoder.encode_bytes
        )
        return cls(tokenizer, encoder.ids)

    def grammar(self, caps: Capabilities, reasoning: Reasoning | None) -> TurnGrammar:
        return turn_grammar(self.ids, caps, reasoning, self.single)

    def _pristine(
        self, caps: Capabilities, reasoning: Reasoning | None
    ) -> tuple[Any, tuple[str, ...]]:
        """The compiled matcher (never advanced) for `caps` and `reasoning`, and its grammar's
        warnings."""
        from llguidance import LLMatcher

        declared = {"tools": caps.to_value().get("tools", []), "actions": list(caps.actions)}
        key = (
            json.dumps(declared, ensure_ascii=False),  # key order is the grammar's too
            None if reasoning is None else reasoning.mode,
            None if reasoning is None else reasoning.max_tokens,
        )
        found = self._compiled.get(key)
        if found is not None:
            self._compiled.move_to_end(key)
            return found
        grammar = self.grammar(caps, reasoning)
        matcher = LLMatcher(self.tokenizer, grammar.lark, log_level=0)
        self.builds += 1
        if matcher.is_error():
            raise ValueError(f"the turn's grammar does not compile: {matcher.get_error()}")
        found = self._compiled[key] = (matcher, grammar.warnings)
        while len(self._compiled) > _CACHE_SIZE:
            self._compiled.popitem(last=False)
        return found

    def for_turn(self, caps: Capabilities, reasoning: Reasoning | None) -> GrammarConstraint:
        """The constraint for one turn under `caps` and `reasoning`."""
        pristine, warnings = self._pristine(caps, reasoning)
        return GrammarConstraint(
            pristine.deep_copy(),
            pristine.deep_copy,
            self.ids,
            self.vocab_size,
            self._masks,
            warnings,
        )

    def __call__(self, session: Any) -> GrammarConstraint:
        return self.for_turn(session.caps, session.reasoning)
