"""The token-id compiler: structure inserted as ids by this trusted code, every payload encoded
by a plain encoder that can't produce an added token, and every id checked afterwards.

The seed's secure serialization (`tokens = [SYS_ID, *encode_plain(system_payload), …]`), with
the framing of `render.py`. The encoder (`encode.PlainEncoder`, `trie.TrieEncoder`) raises
`InjectionError` naming the payload when an encoded payload holds a structural or markup id; the
compiler checks every encoded payload again itself, whatever the encoder (`added.check_ids`
against the encoder's `forbidden` and the whole SMI block: it trusts no encoder's own check), and
token runs given by the caller (image or action codecs) get the same check, so a run can't
smuggle in a structural id either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from .render import FRAME, Piece, pieces, transmission_pieces
from .stream import SmiError, Transmission, check, parse_ctrl
from .tokens import Kind, TokenIds
from .vocab.added import check_ids

__all__ = ["IGNORE", "Compiled", "Compiler", "Encoder", "pad_batch"]

#: the label of a position that isn't a training target (PyTorch's cross-entropy default)
IGNORE = -100


class Encoder(Protocol):
    """What the compiler needs of a plain encoder (encode.PlainEncoder, trie.TrieEncoder)."""

    @property
    def forbidden(self) -> frozenset[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


@dataclass(frozen=True)
class Compiled:
    """One conversation as ids, with training labels (IGNORE outside the model's blocks) and
    the assistant mask (1 where the model wrote the token)."""

    ids: list[int]
    labels: list[int]
    assistant_mask: list[int]

    def __len__(self) -> int:
        return len(self.ids)


class Compiler:
    """Compiles streams for one tokenizer: its plain encoder and its SMI ids."""

    def __init__(self, encoder: Encoder, ids: TokenIds, *, strict: bool = True) -> None:
        self.encoder = encoder
        self.ids = ids
        self.strict = strict
        #: what no payload or token run may hold, checked here whatever the encoder checked
        self.forbidden: frozenset[int] = frozenset(encoder.forbidden) | ids.all
        missing = ids.structural - encoder.forbidden
        if missing:  # the encoder must refuse the very ids the compiler inserts
            raise ValueError(f"the encoder doesn't forbid the structural ids {sorted(missing)}")

    # -- whole conversations (training data) --------------------------------------------------

    def compile(self, transmissions: Sequence[Transmission]) -> Compiled:
        return self.compile_batch([transmissions])[0]

    def compile_batch(self, conversations: Sequence[Sequence[Transmission]]) -> list[Compiled]:
        """Many conversations, their text encoded in one batch (the encoder's fast path)."""
        plans = []
        limits = []
        for conversation in conversations:
            check(conversation, strict=self.strict)
            plans.append(list(pieces(conversation)))
            limits.append(_think_limits(conversation))
        texts = [p.text for plan in plans for p in plan if p.text is not None]
        encoded = iter(self._encode_texts(texts, plans))
        together = zip(plans, limits, strict=True)
        return [self._assemble(plan, encoded, limit) for plan, limit in together]

    def _encode_texts(self, texts: list[str], plans: list[list[Piece]]) -> list[list[int]]:
        try:
            return self.encoder.encode_batch(texts)
        except ValueError:
            # the batch only says that one text failed: find which, and name its payload
            for plan in plans:
                for piece in plan:
                    if piece.text is not None:
                        self._encode(piece)
            raise

    def _assemble(
        self, plan: list[Piece], encoded: Iterator[list[int]], limits: list[int | None] | None
    ) -> Compiled:
        out: list[int] = []
        labels: list[int] = []
        mask: list[int] = []
        sizes: list[int] | None = [] if limits is not None else None
        for piece in plan:
            if piece.token is not None:
                chunk = [self.ids[piece.token]]
            elif piece.text is not None:
                chunk = next(encoded)
                check_ids(chunk, self.forbidden, piece.where or "framing")
            else:
                assert piece.run is not None
                chunk = list(piece.run.ids)
                check_ids(chunk, self.forbidden, f"{piece.where}: a token run")
            out.extend(chunk)
            labels.extend(chunk if piece.target else [IGNORE] * len(chunk))
            mask.extend([int(piece.target)] * len(chunk))
            if sizes is not None:
                sizes.append(len(chunk))
        if limits is not None and sizes is not None:
            _check_think(plan, sizes, limits)
        return Compiled(out, labels, mask)

    # -- one transmission at a time (the runtime) ---------------------------------------------

    def compile_runtime(self, transmission: Transmission, *, after_model_eot: bool) -> list[int]:
        """The ids the runtime feeds for one of its transmissions: the `"\\n"` the model's
        `<|eot|>` is owed when the model spoke last (it stops at the id), then the blocks,
        `<|eot|>` and its `"\\n"`. The caller checks the transmission in its conversation."""
        if transmission.side != "runtime":
            raise ValueError("compile_runtime takes a runtime transmission")
        out = self.eot_frame() if after_model_eot else []
        for piece in transmission_pieces(transmission):
            if piece.token is not None:
                out.append(self.ids[piece.token])
            elif piece.text is not None:
                out.extend(self._encode(piece))
            else:
                assert piece.run is not None
                check_ids(piece.run.ids, self.forbidden, f"{piece.where}: a token run")
                out.extend(piece.run.ids)
        return out

    def _encode(self, piece: Piece) -> list[int]:
        """One text piece; an encoder's refusal gets the payload's place in front."""
        assert piece.text is not None
        where = piece.where or "framing"
        try:
            ids = self.encoder.encode(piece.text)
        except ValueError as exc:
            raise type(exc)(f"{where}: {exc}") from None
        check_ids(ids, self.forbidden, where)
        return ids

    def eot_frame(self) -> list[int]:
        """The `"\\n"` after an EOT, as ids."""
        ids = self.encoder.encode(FRAME)
        check_ids(ids, self.forbidden, "the frame after <|eot|>")
        return ids

    @property
    def eot(self) -> int:
        return self.ids[Kind.EOT]


def _think_limits(conversation: Sequence[Transmission]) -> list[int | None] | None:
    """The `ctrl.reasoning.max_tokens` in force at each transmission (a CTRL's reasoning
    applies from the end of its transmission on, as the parser reads it); None when no
    transmission has a limit (nothing to count)."""
    limits: list[int | None] = []
    limit: int | None = None
    for transmission in conversation:
        limits.append(limit)
        for block in transmission.blocks:
            if block.kind is Kind.CTRL:
                reasoning = parse_ctrl(block.text).reasoning  # valid: `check` read it
                if reasoning is not None:
                    limit = reasoning.max_tokens
    return limits if any(n is not None for n in limits) else None


def _check_think(plan: Sequence[Piece], sizes: Sequence[int], limits: Sequence[int | None]) -> None:
    """Refuse a transmission whose THINK ids outnumber the `max_tokens` in force, counted as
    the parser and the budget count them: every id after a `<|think|>` up to the next
    structural id (its framing "\n" too), all THINK blocks of the transmission together. Else
    the compiler's own output is what a strict parser refuses and a budget never lets a model
    write."""
    transmission = block = count = 0
    kind: Kind | None = None
    past: int | None = None  # the block where the count passed the limit
    for piece, size in zip(plan, sizes, strict=True):
        if piece.token is Kind.EOT:
            limit = limits[transmission]
            if limit is not None and count > limit:
                raise SmiError(
                    f"its THINK blocks hold {count} ids (every id after <|think|>, the framing "
                    f'"\\n" included), more than ctrl.reasoning.max_tokens ({limit}): shorten '
                    "the reasoning or raise max_tokens",
                    transmission,
                    past,
                )
            transmission += 1
            block = count = 0
            kind = past = None
        elif piece.token is not None:
            kind = piece.token
            block += 1
        elif kind is Kind.THINK:
            count += size
            limit = limits[transmission]
            if past is None and limit is not None and count > limit:
                past = block - 1


def pad_batch(
    batch: Sequence[Compiled], pad_id: int, *, side: str = "right"
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """(input_ids, labels, attention_mask) padded to the longest: pad positions get `pad_id`,
    IGNORE and 0."""
    if side not in ("left", "right"):
        raise ValueError("side is left or right")
    width = max((len(c) for c in batch), default=0)
    ids, labels, attention = [], [], []
    for c in batch:
        gap = width - len(c)
        if side == "right":
            ids.append(c.ids + [pad_id] * gap)
            labels.append(c.labels + [IGNORE] * gap)
            attention.append([1] * len(c) + [0] * gap)
        else:
            ids.append([pad_id] * gap + c.ids)
            labels.append([IGNORE] * gap + c.labels)
            attention.append([0] * gap + [1] * len(c))
    return ids, labels, attention
