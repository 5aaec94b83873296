"""The ten structural tokens of the State Model Interface (seed 003) and their 32-id block.

Slots 0-9 are the ten tokens in the seed's order; 10-31 are reserved. An implementation that
needs BOS/EOS takes them from the reserve: smllm puts them at slots 10 and 11, so a tokenizer
with them and one without agree on every other id. A `TokenIds` maps slots to a tokenizer's
real ids (installing appends the block at the end of the vocabulary, so the ids are usually
`base + slot`, but nothing here relies on that).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "BLOCK_SIZE",
    "BOS",
    "EOS",
    "MODEL_SIDE",
    "RUNTIME_SIDE",
    "TOKEN_TEXT",
    "Kind",
    "TokenIds",
    "slot_text",
]


class Kind(enum.IntEnum):
    """A structural token, by its slot in the reserved block (seed 003's table)."""

    CTRL = 0
    SYS = 1
    DEV = 2
    CAPS = 3
    USR = 4
    OBS = 5
    THINK = 6
    OUT = 7
    ACT = 8
    EOT = 9

    @property
    def text(self) -> str:
        return TOKEN_TEXT[self]

    @property
    def tag(self) -> str:
        """The block type's name as the native form and JSON spell it: `ctrl`, `sys`, …"""
        return self.name.lower()

    @classmethod
    def from_tag(cls, tag: str) -> Kind:
        try:
            return cls[tag.upper()]
        except KeyError:
            raise ValueError(f"{tag!r} is not an SMI block type") from None


#: the tokens as text, slot by slot
TOKEN_TEXT: tuple[str, ...] = tuple(f"<|{kind.name.lower()}|>" for kind in Kind)
#: how many ids the block reserves (00-09 used, 10-31 reserved)
BLOCK_SIZE = 32
#: the optional sequence tokens' slots, taken from the reserve
BOS = 10
EOS = 11

#: blocks the runtime writes (a runtime transmission) and blocks the model writes
RUNTIME_SIDE = frozenset({Kind.CTRL, Kind.SYS, Kind.DEV, Kind.CAPS, Kind.USR, Kind.OBS})
MODEL_SIDE = frozenset({Kind.THINK, Kind.OUT, Kind.ACT})


def slot_text(slot: int) -> str:
    """The token text of any of the 32 slots: the ten, `<|bos|>`, `<|eos|>`, then
    `<|reserved_12|>` … `<|reserved_31|>`."""
    if not 0 <= slot < BLOCK_SIZE:
        raise ValueError(f"slot {slot} is outside the {BLOCK_SIZE}-id block")
    if slot < len(TOKEN_TEXT):
        return TOKEN_TEXT[slot]
    if slot == BOS:
        return "<|bos|>"
    if slot == EOS:
        return "<|eos|>"
    return f"<|reserved_{slot}|>"


@dataclass(frozen=True)
class TokenIds:
    """A tokenizer's ids for the block's slots (always all 32: reserved ones stay reserved,
    so no later vocabulary change can put text on them)."""

    ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.ids) != BLOCK_SIZE:
            raise ValueError(f"an SMI block has {BLOCK_SIZE} ids, not {len(self.ids)}")
        if len(set(self.ids)) != BLOCK_SIZE:
            raise ValueError("the SMI block's ids must be distinct")

    @classmethod
    def contiguous(cls, base: int) -> TokenIds:
        return cls(tuple(range(base, base + BLOCK_SIZE)))

    def __getitem__(self, kind: Kind | int) -> int:
        return self.ids[int(kind)]

    @property
    def structural(self) -> frozenset[int]:
        """The ids of the ten tokens."""
        return frozenset(self.ids[: len(Kind)])

    @property
    def all(self) -> frozenset[int]:
        """Every id of the block, reserved ones included."""
        return frozenset(self.ids)

    def kind_of(self, token_id: int) -> Kind | None:
        """The structural token an id stands for; None for any other id (a reserved one too)."""
        try:
            slot = self.ids.index(token_id)
        except ValueError:
            return None
        return Kind(slot) if slot < len(Kind) else None

    @property
    def bos(self) -> int:
        return self.ids[BOS]

    @property
    def eos(self) -> int:
        return self.ids[EOS]
