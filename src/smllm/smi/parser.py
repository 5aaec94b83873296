"""A streaming parser for SMI token ids: model output as it is sampled, or whole conversations.

Structure is read from ids only: a structural id opens a block (closing the one before) or
ends the transmission; nothing in the decoded text can. Payload ids go through a `Decoder`
(UTF-8 safe, reset at each block start), and the canonical framing is removed at the text
level, because BPE may merge the framing `"\\n"` with payload characters (`"\\n\\n"`): one
leading `"\\n"` right after the block token and one trailing `"\\n"` right before the next
structural id are framing, the rest is payload. So a text delta never ends with a `"\\n"`
the parser hasn't yet seen followed by more payload: it holds that one back until the next
id says whether it was the last character. A payload without the framing newlines (a model
that left them out, or a WordPiece vocabulary that can't encode them) is read as it is.

Ids outside the text vocabulary (`is_text` false, or inside a `modalities` range) become
`TokenRun` parts, one run per stretch of one modality, and `PayloadTokens` events.

Feeding ids one at a time or in chunks of any size gives the same events: every id is
handled on its own and nothing depends on where a chunk ends.

Strict mode raises `ParseError` (an `SmiError` with the id's position and the events the
failing `feed` produced before it) at the first broken rule; the parser then refuses further
input. Lenient mode never raises: a misplaced structural or reserved id becomes a `Violation`
event and is skipped (the block it interrupted goes on), text before any block start opens an
implicit block (OUT, or USR for a runtime stream), and an empty transmission is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from .stream import Block, Part, Reasoning, SmiError, TokenRun, Transmission, check
from .tokens import MODEL_SIDE, Kind, TokenIds, slot_text
from .vocab.decode import Decoder, fast_step

__all__ = [
    "BlockEnd",
    "BlockStart",
    "EndOfTransmission",
    "Event",
    "ParseError",
    "PayloadText",
    "PayloadTokens",
    "StreamParser",
    "Violation",
    "parse_ids",
]

Side = Literal["model", "runtime", "any"]


@dataclass(frozen=True, slots=True)
class BlockStart:
    kind: Kind


@dataclass(frozen=True, slots=True, init=False)
class PayloadText:
    """A piece of a block's payload text (framing removed); the pieces of a block add up to
    its text."""

    kind: Kind
    text: str

    def __init__(self, kind: Kind, text: str) -> None:
        # frozen: set through the slots, twice as fast as the generated object.__setattr__
        _set_kind(self, kind)
        _set_text(self, text)


_set_kind = cast(Any, PayloadText.__dict__["kind"]).__set__
_set_text = cast(Any, PayloadText.__dict__["text"]).__set__

#: PayloadText events by kind and text, shared (they are immutable): a token's text recurs, and
#: a lookup costs a fifth of making one; each kind's table is emptied when it is full
_TEXT_EVENTS: dict[Kind, dict[str, PayloadText]] = {kind: {} for kind in Kind}
_TEXT_EVENTS_MAX = 8192
#: `feed`'s events while every text must go through `_fast_text`
_NO_EVENTS: dict[str, PayloadText] = {}

_KINDS = tuple(Kind)
_N_KINDS = len(_KINDS)
_EOT, _THINK = Kind.EOT, Kind.THINK  # (a global is faster than an enum's attribute)


class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


_ALL = _Everything()


@dataclass(frozen=True, slots=True)
class PayloadTokens:
    """Ids of another modality inside a payload, as they arrive."""

    kind: Kind
    ids: tuple[int, ...]
    modality: str | None = None


@dataclass(frozen=True, slots=True)
class BlockEnd:
    block: Block


@dataclass(frozen=True, slots=True)
class EndOfTransmission:
    transmission: Transmission


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken rule, in lenient mode (strict mode raises instead); `position` is the 0-based
    index of the offending id in everything fed so far."""

    message: str
    position: int


Event = BlockStart | PayloadText | PayloadTokens | BlockEnd | EndOfTransmission | Violation


class ParseError(SmiError):
    """A strict parser's refusal: `position` is the offending id's 0-based index in the
    stream; `events` are those the failing call produced before it (already valid)."""

    def __init__(
        self,
        message: str,
        transmission: int | None,
        block: int | None,
        position: int,
        events: Sequence[Event] = (),
    ) -> None:
        super().__init__(f"{message} (at id {position})", transmission, block)
        self.position = position
        self.events: tuple[Event, ...] = tuple(events)


class _Refused(Exception):
    """Internal: a rule broke; strict raises it as ParseError, lenient records a Violation.
    `block` is the 0-based index of the block at fault when it isn't the open one."""

    def __init__(self, message: str, block: int | None = None) -> None:
        super().__init__(message)
        self.block = block


class StreamParser:
    """Ids in, events out. `side` says whose stream it reads: "model" (the runtime reading
    generated ids: only think/out/act and eot), "runtime", or "any" (a whole conversation:
    both, each transmission of one side). `reasoning` is the CTRL reasoning in force (a THINK
    while it is `disabled` is refused, and so are THINK ids past `max_tokens` in one
    transmission: the budget processor's count, checked again); CTRL blocks the parser reads
    update it.

    `is_text(id)` and `modalities` ({name: range or set of ids}) tell payload text from other
    modalities; with neither, every non-structural id is text. Payloads of `text_kinds`
    (CTRL and CAPS by default: their payloads are JSON) may hold no other modality.
    """

    def __init__(
        self,
        ids: TokenIds,
        decoder: Decoder,
        *,
        strict: bool = True,
        side: Side = "model",
        reasoning: Reasoning | None = None,
        is_text: Callable[[int], bool] | None = None,
        modalities: Mapping[str, Container[int]] | None = None,
        text_kinds: Collection[Kind] = frozenset({Kind.CTRL, Kind.CAPS}),
    ) -> None:
        if side not in ("model", "runtime", "any"):
            raise ValueError(f"side must be 'model', 'runtime' or 'any', not {side!r}")
        self.ids = ids
        self.decoder = decoder
        self.strict = strict
        self.side: Side = side
        self._reasoning = reasoning
        self._is_text = is_text
        self._modalities = dict(modalities or {})
        self._all_text = is_text is None and not self._modalities
        self._text_kinds = frozenset(text_kinds)
        self._slots = {token_id: slot for slot, token_id in enumerate(ids.ids)}
        self._implicit_kind = Kind.USR if side == "runtime" else Kind.OUT
        self._failed: ParseError | None = None
        self.position = 0  # ids handled so far
        self.transmission_index = 0  # transmissions ended so far
        self._blocks: list[Block] = []
        self._tside: str | None = None
        self._kind: Kind | None = None  # the open block; None between transmissions
        self._gap = ""  # text seen between transmissions (the "\n" after an EOT)
        self._think_ids = 0  # payload ids in THINK blocks of this transmission
        self._think_from: int | None = None  # and those since this position (`_update_fast`)
        self._reset_block()
        decoder.reset()
        self._raw, self._raw_arg, self._held = fast_step(decoder)
        self._raw_step = getattr(decoder, "raw_step", None)  # to ask again (`_update_fast`)
        #: `feed`'s inline path is open for the ids not in this: all of them, or (a text id now is
        #: plain payload, see `_update_fast`) the structural ones
        self._gate: Container[int] = _ALL
        self._text_add = self._text.append
        self._events = _TEXT_EVENTS[Kind.OUT]  # the open block's kind's, for that path

    # -- public ----------------------------------------------------------------------------

    @property
    def reasoning(self) -> Reasoning | None:
        return self._reasoning

    @reasoning.setter
    def reasoning(self, reasoning: Reasoning | None) -> None:
        self._reasoning = reasoning
        self._gate = _ALL  # a THINK limit may now apply

    @property
    def open_block(self) -> Kind | None:
        """The kind of the block being read, None between transmissions."""
        return self._kind

    def feed(self, token_ids: int | Iterable[int]) -> list[Event]:
        """Handle one id or several; the events they complete, in order."""
        if isinstance(token_ids, int) and token_ids not in self._gate:
            # the common case inline: one text id inside a block, its leading "\n" settled
            try:
                text = self._raw(self._raw_arg, token_ids)
            except Exception as exc:
                return self._fast_failed(token_ids, exc)
            try:
                event = self._events[text]  # type: ignore[index]  # not None, "", "…\n"
            except KeyError:
                return self._fast_text(token_ids, text)
            self.position += 1
            self._text_add(text)  # type: ignore[arg-type]
            return [event]
        self._check_usable()
        self._gate = _ALL
        self._settle_think()
        batch = (token_ids,) if isinstance(token_ids, int) else token_ids
        out: list[Event] = []
        try:
            for token_id in batch:
                try:
                    self._one(out, token_id)
                except _Refused as refused:
                    self._refused(out, refused)
                self.position += 1
        finally:
            self._update_fast()
        return out

    def finish(self) -> list[Event]:
        """The end of the stream. Strict: an open transmission (no `<|eot|>`) is an error.
        Lenient: the open block and transmission are closed as if `<|eot|>` had come."""
        self._check_usable()
        self._gate = _ALL
        self._settle_think()
        out: list[Event] = []
        try:
            self._finish(out)
        except _Refused as refused:
            self._refused(out, refused)
        finally:
            self._update_fast()
        return out

    # -- machinery -------------------------------------------------------------------------

    def _update_fast(self) -> None:
        """Open `feed`'s inline path where a text id is payload text: a block with no run, and
        THINK ids only while no limit applies (they are counted from the position,
        `_settle_think`); texts take shared events as `_share_events` says."""
        self._settle_think()
        kind = self._kind
        fast = self._all_text and kind is not None and not self._run and self._failed is None
        if kind is _THINK and fast:
            if self._reasoning is not None and self._reasoning.max_tokens is not None:
                fast = False
            else:
                self._think_from = self.position
        self._gate = self._slots if fast else _ALL
        # the decoder's state may have changed (a byte-level one's half character)
        if self._raw_step is not None:
            self._raw, self._raw_arg, self._held = self._raw_step()
        if kind is not None:
            self._share_events()
        self._text_add = self._text.append

    def _share_events(self) -> None:
        """The open block's shared events for `feed`, once its leading "\\n" is settled and
        no "\\n" is held; till then none, so every text goes through `_fast_text`."""
        unsettled = self._at_start or self._held_newline
        self._events = _NO_EVENTS if unsettled else _TEXT_EVENTS[self._kind]  # type: ignore[index]

    def _settle_think(self) -> None:
        if self._think_from is not None:
            self._think_ids += self.position - self._think_from
            self._think_from = None

    def _fast_text(self, token_id: int, text: str | None) -> list[Event]:
        """`feed`'s inline path for a text with no shared event: None (the decoder's fast
        step didn't give it), the block's first text or one after a held "\\n" or one ending
        in "\\n" (framing, see `_text_in`), or a new text."""
        if text is None:
            return self._fast_failed(token_id, None)
        self.position += 1
        if self._at_start or self._held_newline or text[-1:] == "\n":
            out: list[Event] = []
            self._text_in(out, text)
            self._share_events()
            return out
        if not text:
            return []
        self._text.append(text)
        return [self._new_text(text)]

    def _new_text(self, text: str) -> PayloadText:
        """A shared event for a text without a trailing "\\n"."""
        events = _TEXT_EVENTS[self._kind]  # type: ignore[index]
        if len(events) >= _TEXT_EVENTS_MAX:
            events.clear()
        event = events[text] = PayloadText(self._kind, text)  # type: ignore[arg-type]
        return event

    def _fast_failed(self, token_id: int, exc: Exception | None) -> list[Event]:
        """`feed`'s inline path when the fast step gave None or raised."""
        self._settle_think()
        out: list[Event] = []
        try:
            if self._held is not None:
                try:
                    text = self._held(token_id)
                except ValueError as error:
                    raise _Refused(str(error)) from None
                if exc is not None:
                    raise exc
                if text:
                    self._text_in(out, text)
            elif isinstance(exc, ValueError):
                raise _Refused(str(exc)) from None
            elif exc is not None:
                raise exc
            if self._kind is _THINK:
                self._think_ids += 1
        except _Refused as refused:
            self._refused(out, refused)
        self.position += 1
        self._update_fast()
        return out

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise ValueError(f"the parser stopped at an earlier error: {self._failed}")

    def _refused(self, out: list[Event], refused: _Refused) -> None:
        """Strict: raise the ParseError (and refuse all further input); lenient: report."""
        message = str(refused)
        block = refused.block
        if block is None and self._kind is not None:
            block = len(self._blocks)
        if self.strict:
            error = ParseError(message, self.transmission_index, block, self.position, out)
            self._failed = error
            self._gate = _ALL
            raise error from None
        self._violation(out, message, block)

    def _violation(self, out: list[Event], message: str, block: int | None) -> None:
        where = f"transmission {self.transmission_index + 1}"
        where += f", block {block + 1}" if block is not None else ""
        out.append(Violation(f"{where}: {message}", self.position))

    def _reset_block(self) -> None:
        self._text: list[str] = []  # the current text part, in pieces
        self._parts: list[Part] = []
        self._run: list[int] = []
        self._run_modality: str | None = None
        self._at_start = True  # nothing of the payload seen yet (leading "\n" is framing)
        self._held_newline = False  # a trailing "\n" that may be framing

    def _one(self, out: list[Event], token_id: int) -> None:
        slot = self._slots.get(token_id)
        if slot is None:
            self._payload(out, token_id)
            if self._kind is _THINK:
                self._count_think()
        elif slot < _N_KINDS:
            self._structural(out, _KINDS[slot])
        else:
            raise _Refused(f"the reserved SMI id {token_id} ({slot_text(slot)}) in a stream")

    def _structural(self, out: list[Event], kind: Kind) -> None:
        if kind is not _EOT:
            side = "model" if kind in MODEL_SIDE else "runtime"
            if self.side != "any" and side != self.side:
                raise _Refused(f"a {side}-side {kind.text} in a {self.side} stream")
            if self._tside is not None and side != self._tside:
                raise _Refused(f"a {side}-side {kind.text} in a {self._tside} transmission")
        self._close(out)
        if kind is _EOT:
            self._end_transmission(out)
            return
        self._kind = kind
        self._tside = "model" if kind in MODEL_SIDE else "runtime"
        self._reset_block()
        self.decoder.reset()
        out.append(BlockStart(kind))
        if kind is _THINK and self._reasoning is not None and self._reasoning.mode == "disabled":
            raise _Refused("a <|think|> block while ctrl.reasoning.mode is disabled")

    def _count_think(self) -> None:
        """THINK ids of one transmission against `max_tokens`, counted as the budget counts
        them (every id after a `<|think|>`, its framing "\\n" too); reported once."""
        self._think_ids += 1
        limit = self._reasoning.max_tokens if self._reasoning is not None else None
        if limit is not None and self._think_ids == limit + 1:
            raise _Refused(f"more than ctrl.reasoning.max_tokens ({limit}) THINK ids")

    def _classify(self, token_id: int) -> tuple[bool, str | None]:
        for name, members in self._modalities.items():
            if token_id in members:
                return False, name
        if self._is_text is not None and not self._is_text(token_id):
            return False, None
        return True, None

    def _decode(self, token_id: int) -> str:
        try:
            return self.decoder.step(token_id)
        except ValueError as exc:
            raise _Refused(str(exc)) from None

    def _payload(self, out: list[Event], token_id: int) -> None:
        if self._all_text and self._kind is not None and not self._run:  # the common case
            try:
                text = self.decoder.step(token_id)
            except ValueError as exc:
                raise _Refused(str(exc)) from None
            if text:
                self._text_in(out, text)
            return
        is_text, modality = self._classify(token_id)
        if self._kind is None:
            if is_text:
                self._gap += self._decode(token_id)
                self._check_gap(out)
                return
            if self.strict:
                raise _Refused(f"payload id {token_id} before any block start")
            self._open_implicit(out)
        kind = self._kind
        assert kind is not None
        if is_text:
            self._end_run()
            self._text_in(out, self._decode(token_id))
            return
        if kind in self._text_kinds:
            raise _Refused(f"id {token_id} ({modality or 'not text'}) in a {kind.tag} payload")
        self._text_in(out, self.decoder.flush())
        if self._held_newline:  # followed by a run, so payload after all
            self._held_newline = False
            self._emit(out, "\n")
        self._end_text()
        if self._run and modality != self._run_modality:
            self._end_run()
        self._run.append(token_id)
        self._run_modality = modality
        self._at_start = False
        out.append(PayloadTokens(kind, (token_id,), modality))

    def _check_gap(self, out: list[Event]) -> None:
        """Between transmissions only the canonical "\\n" after an EOT may come (strict);
        lenient reads anything but whitespace as the start of an implicit block."""
        if self._gap in ("", "\n"):
            return
        if self.strict:
            raise _Refused(f"payload text {self._gap[:40]!r} before any block start")
        if self._gap.isspace():
            return
        text, self._gap = self._gap, ""
        self._open_implicit(out)
        self._text_in(out, text)

    def _open_implicit(self, out: list[Event]) -> None:
        kind = self._implicit_kind
        self._violation(out, f"payload before any block start: read as {kind.tag}", None)
        self._kind = kind
        self._tside = "model" if kind in MODEL_SIDE else "runtime"
        self._reset_block()
        out.append(BlockStart(kind))

    def _emit(self, out: list[Event], text: str) -> None:
        assert self._kind is not None
        self._text.append(text)
        out.append(PayloadText(self._kind, text))

    def _text_in(self, out: list[Event], text: str) -> None:
        if not text:
            return
        if self._at_start:
            self._at_start = False
            if text.startswith("\n"):
                text = text[1:]
        if self._held_newline:
            text = "\n" + text
            self._held_newline = False
        if text.endswith("\n"):
            text = text[:-1]
            self._held_newline = True
        if text:
            self._emit(out, text)

    def _end_text(self) -> None:
        if self._text:
            self._parts.append("".join(self._text))
            self._text = []

    def _end_run(self) -> None:
        if self._run:
            self._parts.append(TokenRun(tuple(self._run), self._run_modality))
            self._run = []
            self._run_modality = None

    def _close(self, out: list[Event]) -> None:
        """Close what is open at a structural id: the block (its trailing framing "\\n"
        dropped) or the text between transmissions."""
        if self._kind is None:
            self._gap += self.decoder.flush()
            self._check_gap(out)
            if self._kind is None:
                self._gap = ""
                return
        self._text_in(out, self.decoder.flush())
        self._held_newline = False
        self._end_text()
        self._end_run()
        assert self._kind is not None
        block = Block(self._kind, tuple(self._parts))
        self._blocks.append(block)
        self._kind = None
        self._reset_block()
        out.append(BlockEnd(block))

    def _end_transmission(self, out: list[Event]) -> None:
        transmission = Transmission(tuple(self._blocks))
        self._blocks = []
        self._tside = None
        self._gap = ""
        self._think_ids = 0
        self.decoder.reset()
        if not transmission.blocks and self.strict:
            raise _Refused("an empty transmission (<|eot|> with no block before it)")
        try:
            reasoning = check([transmission], strict=self.strict)
        except SmiError as exc:
            if self.strict:
                raise _Refused(exc.reason, exc.block) from None
            self._violation(out, exc.reason, exc.block)
        else:
            if reasoning is not None:
                self.reasoning = reasoning
        self.transmission_index += 1
        out.append(EndOfTransmission(transmission))

    def _finish(self, out: list[Event]) -> None:
        if self.strict and (self._kind is not None or self._blocks):
            raise _Refused("the stream ended inside a transmission (no <|eot|>)")
        self._close(out)  # the open block, or the text after the last EOT (checked)
        if self._blocks:
            self._end_transmission(out)
        self.decoder.reset()


def parse_ids(
    token_ids: Iterable[int],
    ids: TokenIds,
    decoder: Decoder,
    *,
    side: Side = "any",
    strict: bool = True,
    reasoning: Reasoning | None = None,
    is_text: Callable[[int], bool] | None = None,
    modalities: Mapping[str, Container[int]] | None = None,
) -> list[Transmission]:
    """A whole stream's transmissions (a conversation, by default either side)."""
    parser = StreamParser(
        ids,
        decoder,
        strict=strict,
        side=side,
        reasoning=reasoning,
        is_text=is_text,
        modalities=modalities,
    )
    events = parser.feed(token_ids)
    events += parser.finish()
    return [e.transmission for e in events if isinstance(e, EndOfTransmission)]
