"""The one canonical rendering of an SMI stream, as pieces: the token-id compiler and the text
form both read it, so they can't drift apart (smi-notes §5.3.1).

Framing (the reference implementation's, and the seed's examples): each block is
`TOKEN "\\n" PAYLOAD "\\n"`, each transmission ends `<|eot|> "\\n"`. The text between two
structural tokens is one *segment* of plain text; a payload's token runs sit between its text
pieces. Targets (labels) are the model's blocks and its `<|eot|>`; the `"\\n"` after any EOT is
framing the runtime supplies (the model stops at `<|eot|>`), never a target.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .stream import TokenRun, Transmission
from .tokens import Kind

__all__ = ["FRAME", "Piece", "pieces", "render_text", "transmission_pieces"]

#: the framing character around payloads and after EOT
FRAME = "\n"


@dataclass(frozen=True)
class Piece:
    """One piece of the stream: exactly one of `token` (a structural token, inserted as its
    id), `text` (plain text, encoded with added tokens off) or `run` (ids copied as they
    are). `target`: the model writes it (a training label). `where`: the payload it belongs
    to, for error messages (`transmission 2, block 1 (usr)`); "" for framing."""

    token: Kind | None = None
    text: str | None = None
    run: TokenRun | None = None
    target: bool = False
    where: str = ""


def transmission_pieces(transmission: Transmission, index: int = 0) -> Iterator[Piece]:
    """One transmission's pieces, its closing `<|eot|>` and the `"\\n"` after it included.
    Text pieces that touch (framing and payload text) are merged: one segment, one encode."""
    model = transmission.side == "model"
    for b, block in enumerate(transmission.blocks):
        where = f"transmission {index + 1}, block {b + 1} ({block.kind.tag})"
        yield Piece(token=block.kind, target=model, where=where)
        text = FRAME
        for part in block.parts:
            if isinstance(part, str):
                text += part
                continue
            if text:
                yield Piece(text=text, target=model, where=where)
                text = ""
            yield Piece(run=part, target=model, where=where)
        yield Piece(text=text + FRAME, target=model, where=where)
    yield Piece(token=Kind.EOT, target=model, where=f"transmission {index + 1}")
    yield Piece(text=FRAME, target=False)


def pieces(transmissions: Sequence[Transmission]) -> Iterator[Piece]:
    for t, transmission in enumerate(transmissions):
        yield from transmission_pieces(transmission, t)


def render_text(transmissions: Sequence[Transmission]) -> str:
    """The text form: for logs, for `smllm smi parse`, and for trusted-input templates. A
    stream with token runs has no text form (ValueError): its ids are the truth."""
    out: list[str] = []
    for piece in pieces(transmissions):
        if piece.token is not None:
            out.append(piece.token.text)
        elif piece.text is not None:
            out.append(piece.text)
        else:
            raise ValueError(f"{piece.where}: a token run has no text form")
    return "".join(out)
