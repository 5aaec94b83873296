"""`StreamParser`: ids in, events out; the payload path (decoding, framing, token runs) and the
inline fast path of `feed`, with the structure left to `grammar.Grammar`.

Structure is read from ids only: a structural id opens a block (closing the one before) or
ends the transmission; nothing in the decoded text can. Payload ids go through a `Decoder`
(UTF-8 safe, reset at each block start), and the canonical framing is removed at the text
level, because BPE may merge the framing `"\\n"` with payload characters (`"\\n\\n"`): one
leading `"\\n"` right after the block token and one trailing `"\\n"` right before the next
structural id are framing, the rest is payload. So a text delta never ends with a `"\\n"`
the parser hasn't yet seen followed by more payload: it holds that one back until the next
id says whether it was the last character. A payload without the framing newlines (a model
that left them out, or a WordPiece vocabulary that can't encode them) is read as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Mapping

from ..stream import Block, Part, Reasoning, TokenRun, Transmission
from ..tokens import Kind, TokenIds, slot_text
from .decoder import Decoder
from .events import (
    BlockEnd,
    BlockStart,
    EndOfTransmission,
    Event,
    ParseError,
    PayloadText,
    PayloadTokens,
    Violation,
)
from .grammar import Grammar, Refused, Side

__all__ = ["StreamParser", "parse_ids"]

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
        self._grammar = Grammar(side, reasoning)
        self.ids = ids
        self.decoder = decoder
        self.strict = strict
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
        #: the open block's kind, which its events carry (the grammar's phase says the same
        #: of structure); None between transmissions
        self._kind: Kind | None = None
        self._gap = ""  # text seen between transmissions (the "\n" after an EOT)
        self._think_from: int | None = None  # THINK ids since this position (`_update_fast`)
        self._reset_block()
        decoder.reset()
        self._raw, self._raw_arg, self._held = decoder.fast_step()
        #: `feed`'s inline path is open for the ids not in this: all of them, or (a text id now is
        #: plain payload, see `_update_fast`) the structural ones
        self._gate: Container[int] = _ALL
        self._text_add = self._text.append
        self._events = _TEXT_EVENTS[Kind.OUT]  # the open block's kind's, for that path

    # -- public ----------------------------------------------------------------------------

    @property
    def side(self) -> Side:
        return self._grammar.side

    @property
    def reasoning(self) -> Reasoning | None:
        return self._grammar.reasoning

    @reasoning.setter
    def reasoning(self, reasoning: Reasoning | None) -> None:
        self._grammar.reasoning = reasoning
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
                except Refused as refused:
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
            self._grammar.finish(strict=self.strict)
            self._close(out)  # the open block, or the text after the last EOT (checked)
            if self._blocks:
                self._end_transmission(out)
            self.decoder.reset()
        except Refused as refused:
            self._refused(out, refused)
        finally:
            self._update_fast()
        return out

    # -- the inline path ---------------------------------------------------------------------

    def _update_fast(self) -> None:
        """Open `feed`'s inline path where a text id is payload text: a block with no run, and
        THINK ids only while no limit applies (they are counted from the position,
        `_settle_think`); texts take shared events as `_share_events` says."""
        self._settle_think()
        kind = self._kind
        fast = self._all_text and kind is not None and not self._run and self._failed is None
        if kind is _THINK and fast:
            if self._grammar.think_limit is not None:
                fast = False
            else:
                self._think_from = self.position
        self._gate = self._slots if fast else _ALL
        # the decoder's state may have changed (a byte-level one's half character)
        self._raw, self._raw_arg, self._held = self.decoder.fast_step()
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
            self._grammar.think_ids += self.position - self._think_from
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
                    raise Refused(str(error)) from None
                if exc is not None:
                    raise exc
                if text:
                    self._text_in(out, text)
            elif isinstance(exc, ValueError):
                raise Refused(str(exc)) from None
            elif exc is not None:
                raise exc
            if self._kind is _THINK:
                self._grammar.think_ids += 1  # (the inline path runs only where no limit applies)
        except Refused as refused:
            self._refused(out, refused)
        self.position += 1
        self._update_fast()
        return out

    # -- refusals ----------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise ValueError(f"the parser stopped at an earlier error: {self._failed}")

    def _refused(self, out: list[Event], refused: Refused) -> None:
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

    # -- one id at a time --------------------------------------------------------------------

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
                self._grammar.count_think()
        elif slot < _N_KINDS:
            self._structural(out, _KINDS[slot])
        else:
            raise Refused(f"the reserved SMI id {token_id} ({slot_text(slot)}) in a stream")

    def _structural(self, out: list[Event], kind: Kind) -> None:
        self._grammar.admit(kind)
        self._close(out)
        if kind is _EOT:
            self._end_transmission(out)
            return
        self._kind = kind
        self._reset_block()
        self.decoder.reset()
        out.append(BlockStart(kind))
        self._grammar.enter(kind)

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
            raise Refused(str(exc)) from None

    def _payload(self, out: list[Event], token_id: int) -> None:
        if self._all_text and self._kind is not None and not self._run:  # the common case
            try:
                text = self.decoder.step(token_id)
            except ValueError as exc:
                raise Refused(str(exc)) from None
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
                raise Refused(f"payload id {token_id} before any block start")
            self._open_implicit(out)
        kind = self._kind
        assert kind is not None
        if is_text:
            self._end_run()
            self._text_in(out, self._decode(token_id))
            return
        if kind in self._text_kinds:
            raise Refused(f"id {token_id} ({modality or 'not text'}) in a {kind.tag} payload")
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
            raise Refused(f"payload text {self._gap[:40]!r} before any block start")
        if self._gap.isspace():
            return
        text, self._gap = self._gap, ""
        self._open_implicit(out)
        self._text_in(out, text)

    def _open_implicit(self, out: list[Event]) -> None:
        kind = self._implicit_kind
        self._violation(out, f"payload before any block start: read as {kind.tag}", None)
        self._kind = kind
        self._grammar.enter(kind)
        self._reset_block()
        out.append(BlockStart(kind))

    # -- text and runs -----------------------------------------------------------------------

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
        self._gap = ""
        self.decoder.reset()
        try:
            self._grammar.end(transmission, strict=self.strict)
        except Refused as refused:
            self._refused(out, refused)
        self.transmission_index += 1
        out.append(EndOfTransmission(transmission))


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
