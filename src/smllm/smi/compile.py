"""The token-id compiler: structure inserted as ids by this trusted code, every payload encoded
by a plain encoder that can't produce an added token, and every id checked afterwards.

The seed's secure serialization (`tokens = [SYS_ID, *encode_plain(system_payload), …]`), with
the framing of `render.py`. The encoder (`encode.PlainEncoder`, `trie.TrieEncoder`) raises
`InjectionError` naming the payload when an encoded payload holds a structural or other added id;
token runs given by the caller (image or action codecs) get the same check here, so a run can't
smuggle in a structural id either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from .render import FRAME, Piece, pieces, transmission_pieces
from .stream import Transmission, check
from .tokens import Kind, TokenIds

__all__ = ["IGNORE", "Compiled", "Compiler", "Encoder", "pad_batch"]

#: the label of a position that isn't a training target (PyTorch's cross-entropy default)
IGNORE = -100
#: the modules whose encoders (exactly these classes) check every result they return
_CHECKING_ENCODERS = frozenset({"smllm.smi.vocab.encode", "smllm.smi.vocab.trie"})


class Encoder(Protocol):
    """What the compiler needs of a plain encoder (encode.PlainEncoder, trie.TrieEncoder)."""

    @property
    def forbidden(self) -> frozenset[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...

    def check(self, ids: Sequence[int], what: str) -> None: ...


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
        # smllm's own encoders check every result themselves; any other encoder (a subclass
        # too) is checked again here: the compiler doesn't trust what it doesn't know
        self._recheck = type(encoder).__module__ not in _CHECKING_ENCODERS
        missing = ids.structural - encoder.forbidden
        if missing:  # the encoder must refuse the very ids the compiler inserts
            raise ValueError(f"the encoder doesn't forbid the structural ids {sorted(missing)}")

    # -- whole conversations (training data) --------------------------------------------------

    def compile(self, transmissions: Sequence[Transmission]) -> Compiled:
        return self.compile_batch([transmissions])[0]

    def compile_batch(self, conversations: Sequence[Sequence[Transmission]]) -> list[Compiled]:
        """Many conversations, their text encoded in one batch (the encoder's fast path)."""
        plans = []
        for conversation in conversations:
            check(conversation, strict=self.strict)
            plans.append(list(pieces(conversation)))
        texts = [p.text for plan in plans for p in plan if p.text is not None]
        encoded = iter(self._encode_texts(texts, plans))
        return [self._assemble(plan, encoded) for plan in plans]

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

    def _assemble(self, plan: list[Piece], encoded: Iterator[list[int]]) -> Compiled:
        out: list[int] = []
        labels: list[int] = []
        mask: list[int] = []
        for piece in plan:
            if piece.token is not None:
                chunk = [self.ids[piece.token]]
            elif piece.text is not None:
                chunk = next(encoded)
                if self._recheck:
                    self.encoder.check(chunk, piece.where or "framing")
            else:
                assert piece.run is not None
                chunk = list(piece.run.ids)
                self.encoder.check(chunk, f"{piece.where}: a token run")
            out.extend(chunk)
            labels.extend(chunk if piece.target else [IGNORE] * len(chunk))
            mask.extend([int(piece.target)] * len(chunk))
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
                self.encoder.check(piece.run.ids, f"{piece.where}: a token run")
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
        if self._recheck:
            self.encoder.check(ids, where)
        return ids

    def eot_frame(self) -> list[int]:
        """The `"\\n"` after an EOT, as ids."""
        return self.encoder.encode(FRAME)

    @property
    def eot(self) -> int:
        return self.ids[Kind.EOT]


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
