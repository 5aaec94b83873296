"""The reasoning budget enforced at generation time, over token ids (seed 003: "The runtime
MUST enforce actual generation limits. The model must not be relied upon to enforce its own
reasoning budget").

`BudgetProcessor` is a per-session state machine over the ids the model generates in one turn
(`reset` starts the next turn). It keeps its own state: it never needs the caller to pass the
whole history, so it works with a carried recurrent state or KV cache, with `generate` called
once per turn, and inside a serving engine that hands it one sampled id at a time.

What it allows at each step (every marker is one id, so the rules are sets of ids):

- never: the runtime-side structural ids (ctrl, sys, dev, caps, usr, obs) and the 22 reserved
  ids of the block (slots 10-31, BOS/EOS included), plus any `extra_forbidden` ids (a base
  vocabulary's own specials); a tiny random model emits all of them otherwise;
- first token of a transmission: only a model-side block token (think, out, act). Text before
  any block has no type, and `<|eot|>` first would be an empty transmission (`stream.check`
  refuses both in strict mode), so neither is allowed;
- right after a block token: a payload id, never a structural one. The canonical framing puts
  `"\n"` there anyway, and an empty block is otherwise a free loop: `<|think|><|think|>…`
  would open THINK blocks for ever without spending a single THINK token;
- `<|think|>` only while reasoning is not `disabled` and budget remains (`max_tokens` None is
  no limit; `max_tokens` 0 means no THINK at all: an empty THINK block is pointless);
- inside THINK, once `max_tokens` ids have been generated there (all THINK blocks of the turn
  together; every id after the `<|think|>` token counts, its framing `"\\n"` included, so the
  count is an upper bound on what the model reasoned): only `<|out|>` or `<|act|>` — the runtime
  decides that thinking ends, the model only chooses how to continue — and no `<|think|>` again
  that turn;
- reasoning None (no CTRL has set it) behaves as the seed's default, adaptive without a limit;
- THINK ends on a whole character: given the vocabulary's bytes per id (`Characters`), no
  structural id comes while THINK's last character is incomplete (a byte-level or
  byte-fallback id can be a part of one), and the last THINK ids of a limited budget are only
  those after which that character can still be completed within what is left, so a cut never
  leaves a broken character and the limit is never overrun for one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

from .stream import Reasoning
from .tokens import BLOCK_SIZE, RUNTIME_SIDE, Kind, TokenIds

__all__ = ["BudgetLogitsProcessor", "BudgetProcessor", "Characters", "Phase"]


class Phase(enum.Enum):
    """Where the model is in its transmission."""

    START = "start"  # no block yet
    THINK = "think"
    OUT = "out"
    ACT = "act"
    DONE = "done"  # `<|eot|>` generated: the turn is over


_PHASE_OF = {Kind.THINK: Phase.THINK, Kind.OUT: Phase.OUT, Kind.ACT: Phase.ACT}


_NEVER = 99  # ids to complete a character that no sequence of ids completes


class Characters:
    """The UTF-8 shape of each id of a vocabulary, for cutting THINK on a whole character.

    `token_bytes(id)` gives an id's bytes as its decoder joins them (`vocab.decode`'s tables;
    passed in, so this room needs no tokenizer); `size` is the vocabulary's. Each id is read
    once, when a limited THINK first nears its end, as: the continuation bytes it starts with
    (`lead`), the continuation bytes its last character still needs (`tail`), whether it is
    continuation bytes only (`pure`) and whether it breaks a character inside (`broken`). An id
    whose bytes can't be read counts as whole (structural ids are ruled on elsewhere)."""

    def __init__(self, token_bytes: Callable[[int], bytes], size: int) -> None:
        self._token_bytes = token_bytes
        self.size = size
        self._shapes: list[tuple[int, int, bool, bool]] | None = None
        self._tensors: Any = None
        self._masks: dict[tuple[int, int, int, str], Any] = {}
        #: `complete[n]`: the fewest ids that complete a character owing n continuation bytes
        self.complete = [0, _NEVER, _NEVER, _NEVER]

    @staticmethod
    def shape_of(data: bytes) -> tuple[int, int, bool, bool]:
        """(lead, tail, pure, broken) of one id's bytes."""
        lead = 0
        while lead < len(data) and 0x80 <= data[lead] < 0xC0:
            lead += 1
        if data and lead == len(data):
            return lead, 0, True, False
        need, broken = 0, False
        for byte in data[lead:]:
            if byte < 0x80 or 0xC2 <= byte < 0xF5:
                broken |= need > 0  # a new character before the last one ended
                need = 0 if byte < 0x80 else 1 if byte < 0xE0 else 2 if byte < 0xF0 else 3
            elif byte < 0xC0 and need > 0:
                need -= 1
            else:  # a stray continuation byte, or one no UTF-8 has
                broken, need = True, 0
        return lead, need, False, broken

    def shapes(self) -> list[tuple[int, int, bool, bool]]:
        if self._shapes is None:
            shapes = []
            for token_id in range(self.size):
                try:
                    data = bytes(self._token_bytes(token_id))
                except (KeyError, IndexError, ValueError, OverflowError, TypeError):
                    data = b""
                shapes.append(self.shape_of(data))
            for need in (1, 2, 3):
                best = _NEVER
                for lead, tail, pure, broken in shapes:
                    if pure and lead <= need:
                        best = min(best, 1 + self.complete[need - lead])
                    elif not pure and not broken and lead == need and tail == 0:
                        best = 1
                self.complete[need] = best
            self._shapes = shapes
        return self._shapes

    @property
    def horizon(self) -> int:
        """The most ids any completable character still needs."""
        self.shapes()
        return max(c for c in self.complete if c < _NEVER)

    def after(self, need: int, token_id: int) -> int | None:
        """The continuation bytes owed after `token_id` when `need` were owed; None where the
        id breaks a character."""
        shapes = self.shapes()
        if not 0 <= token_id < len(shapes):
            return None if need else 0
        lead, tail, pure, broken = shapes[token_id]
        if pure:
            return need - lead if 0 < lead <= need else None
        return None if broken or lead != need else tail

    def fits(self, need: int, token_id: int, left: int) -> bool:
        """Whether `token_id` may come when `need` bytes are owed and `left` THINK ids remain
        after it: the character it leaves can be completed in them."""
        owed = self.after(need, token_id)
        return owed is not None and self.complete[owed] <= left

    def forbidden(self, need: int, left: int, vocab: int, device: Any) -> Any:
        """A torch bool mask over `vocab` ids: True where `fits` is False (made at once for
        the whole vocabulary, once per (need, left))."""
        import torch

        key = (need, left, vocab, str(device))
        mask = self._masks.get(key)
        if mask is None:
            if self._tensors is None:
                self._tensors = [
                    torch.tensor(column) for column in zip(*self.shapes(), strict=True)
                ]
            lead, tail, pure, broken = self._tensors
            owed = torch.where(pure, need - lead, tail).clamp(0, 3)
            valid = torch.where(pure, (lead > 0) & (lead <= need), ~broken & (lead == need))
            fits = valid & (torch.tensor(self.complete)[owed] <= left)
            known = min(vocab, fits.shape[0])
            mask = torch.full((vocab,), need != 0, dtype=torch.bool)
            mask[:known] = ~fits[:known]
            mask = self._masks[key] = mask.to(device)
        return mask


class BudgetProcessor:
    """Masks the ids the model may not generate next and advances on each generated id.

    `apply(logits)` (a torch tensor, `(vocab,)` or `(1, vocab)`) returns a copy with the
    forbidden ids at -inf; `allowed_mask(vocab_size)` gives the same rule as booleans for
    a backend without torch; `observe(token_id)` records the id that was generated.
    """

    def __init__(
        self,
        ids: TokenIds,
        reasoning: Reasoning | None = None,
        *,
        extra_forbidden: Iterable[int] = (),
        characters: Characters | None = None,
    ) -> None:
        self.ids = ids
        self.characters = characters
        self._structural = frozenset(ids[slot] for slot in range(BLOCK_SIZE))
        runtime = {ids[k] for k in RUNTIME_SIDE}
        reserved = {ids[slot] for slot in range(len(Kind), BLOCK_SIZE)}
        self._always = frozenset(runtime | reserved | set(extra_forbidden))
        overlap = self._always & {ids[Kind.THINK], ids[Kind.OUT], ids[Kind.ACT], ids[Kind.EOT]}
        if overlap:
            raise ValueError(f"extra_forbidden may not hold model-side ids: {sorted(overlap)}")
        think, out, act, eot = ids[Kind.THINK], ids[Kind.OUT], ids[Kind.ACT], ids[Kind.EOT]
        self._open = frozenset({think, out, act})
        self._open_no_think = frozenset({out, act})
        self._close_think = frozenset({out, act})
        self._fresh_block = self._always | {think, out, act, eot}
        self._no_think = self._always | {think}
        self._masks: dict[tuple[object, ...], Any] = {}
        self.reset(reasoning)

    # -- state ---------------------------------------------------------------------------

    def reset(self, reasoning: Reasoning | None = None) -> None:
        """Start a new turn under `reasoning` (the reasoning in force for this turn)."""
        self.reasoning = reasoning
        self.phase = Phase.START
        self.think_tokens = 0
        self.block_tokens = 0
        self.generated = 0
        self.owed = 0  # continuation bytes the THINK text's last character still needs

    @property
    def limit(self) -> int | None:
        """THINK ids allowed this turn (None: no limit)."""
        r = self.reasoning
        if r is None:
            return None
        if r.mode == "disabled":
            return 0
        return r.max_tokens

    @property
    def spent(self) -> bool:
        """True once no more THINK ids may be generated this turn."""
        limit = self.limit
        return limit is not None and self.think_tokens >= limit

    def observe(self, token_id: int) -> None:
        """Record one generated id (the one sampled from the masked logits)."""
        if self.phase is Phase.DONE:
            raise ValueError("the turn is over (<|eot|> was generated); reset() starts the next")
        if not self.allows(token_id):
            raise ValueError(f"id {token_id} was not allowed here ({self.phase.value})")
        self.generated += 1
        kind = self.ids.kind_of(token_id)
        if kind is Kind.EOT:
            self.phase = Phase.DONE
        elif kind in _PHASE_OF:
            self.phase = _PHASE_OF[kind]
            self.block_tokens = 0
            self.owed = 0
        else:
            self.block_tokens += 1
            if self.phase is Phase.THINK:
                self.think_tokens += 1
                chars = self.characters
                if chars is not None:
                    owed = chars.after(self.owed, token_id) or 0
                    self.owed = owed if chars.complete[owed] < _NEVER else 0

    # -- the rule ------------------------------------------------------------------------

    def _rule(self) -> tuple[str, frozenset[int]]:
        """("only", ids) or ("forbid", ids) for the next id (the same set objects each time,
        so their hashes are cached and the mask cache hits cheaply)."""
        if self.phase is Phase.DONE:
            raise ValueError("the turn is over (<|eot|> was generated); reset() starts the next")
        spent = self.spent
        if self.phase is Phase.START:
            return ("only", self._open_no_think if spent else self._open)
        if self.phase is Phase.THINK and spent:
            return ("only", self._close_think)
        if self.block_tokens == 0 or (self.owed and self.phase is Phase.THINK):
            # an empty block, or THINK text in the middle of a character: no structure yet
            return ("forbid", self._fresh_block)
        return ("forbid", self._no_think if spent else self._always)

    def _closing(self) -> int | None:
        """THINK ids left after the next one, while the end of a limited THINK is near enough
        that a character begun now might not be completed (None otherwise)."""
        chars, limit = self.characters, self.limit
        if chars is None or limit is None or self.phase is not Phase.THINK:
            return None
        left = limit - self.think_tokens - 1
        return left if 0 <= left < chars.horizon else None

    def allows(self, token_id: int) -> bool:
        how, which = self._rule()
        if (token_id in which) != (how == "only"):
            return False
        left = self._closing()
        if left is None or token_id in self._structural or self.characters is None:
            return True
        return self.characters.fits(self.owed, token_id, left)

    def allowed_mask(self, vocab_size: int) -> list[bool]:
        """For each id below `vocab_size`, whether it may come next."""
        return [self.allows(i) for i in range(vocab_size)]

    def apply(self, logits: Any) -> Any:
        """A copy of `logits` (torch, last dimension the vocabulary) with every forbidden id
        at -inf. The masks are built once per (rule, size, device) and reused."""
        import torch

        how, which = self._rule()
        vocab = int(logits.shape[-1])
        key = (how, which, vocab, str(logits.device))
        mask = self._masks.get(key)
        if mask is None:
            inside = torch.tensor(sorted(i for i in which if i < vocab), dtype=torch.long)
            if how == "only":
                mask = torch.ones(vocab, dtype=torch.bool)
                mask[inside] = False
            else:
                mask = torch.zeros(vocab, dtype=torch.bool)
                mask[inside] = True
            mask = mask.to(logits.device)
            self._masks[key] = mask
        left = self._closing()
        if left is not None and self.characters is not None:
            cut = self.characters.forbidden(self.owed, left, vocab, logits.device).clone()
            cut[[i for i in self._structural if i < vocab]] = False
            mask = mask | cut
        return logits.masked_fill(mask, float("-inf"))

    def hf(self) -> BudgetLogitsProcessor:
        """A transformers logits processor for one `generate` call over this processor."""
        return BudgetLogitsProcessor(self)


class BudgetLogitsProcessor:
    """`BudgetProcessor` as a transformers `LogitsProcessor` for `generate(...,
    logits_processor=[budget.hf()], eos_token_id=ids[Kind.EOT])`, batch 1.

    `generate` passes the whole sequence it knows (this call's prompt and the ids generated so
    far); this adapter remembers how much of it it has seen and hands the budget only the new
    generated ids. Make one per `generate` call (`hf()`): its first call sees the prompt, which
    the budget must not count. `generate` calls processors only before sampling, so the last
    id it samples reaches the budget through `finish(sequences)` after the call. The budget
    itself carries across calls (a turn continued by a second `generate`).
    """

    def __init__(self, budget: BudgetProcessor) -> None:
        self.budget = budget
        self._seen: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[0] != 1:
            raise ValueError("BudgetLogitsProcessor handles batch 1 (one processor per row)")
        length = int(input_ids.shape[1])
        if self._seen is not None:
            for token_id in input_ids[0, self._seen :].tolist():
                self.budget.observe(int(token_id))
        self._seen = length
        return self.budget.apply(scores)

    def finish(self, sequences: Any) -> None:
        """Observe what `generate` sampled after its last call here (its returned sequences,
        or `.sequences` of a dict output)."""
        sequences = getattr(sequences, "sequences", sequences)
        if self._seen is None:
            return
        for token_id in sequences[0, self._seen :].tolist():
            if self.budget.phase is Phase.DONE:
                break  # padding after <|eot|>
            self.budget.observe(int(token_id))
        self._seen = int(sequences.shape[1])
