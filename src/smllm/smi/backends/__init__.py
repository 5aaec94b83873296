"""Model backends for the SMI runtime: one model, many independent session states.

A `Backend` hides how a model carries its sequence memory (a recurrent state, a KV cache,
a serving engine's request) behind four operations. The runtime only ever asks for a fresh
state per session, feeds new ids onto a state, and reads the logits of the last position; it
never looks inside a state, so a state is the unit of session isolation (seed 003: "a fresh
runtime state is the actual sequence-memory boundary").

Logits are whatever the backend's sampler works on; both backends here return a 1-D float
torch tensor of `vocab_size` (torch is imported only inside them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["GREEDY", "Backend", "HFBackend", "Sampler", "ScriptedBackend"]


@runtime_checkable
class Backend(Protocol):
    """What the runtime needs of a model.

    - `new_state()`: a fresh, independent state (nothing shared with any other state);
    - `feed(state, ids)`: run `ids` (one or more) onto `state`, mutating it, and return the
      logits at the last position; `feed(state, [])` returns the last logits again;
    - `snapshot(state)` / `restore(snapshot)`: independent deep copies (a restored state can
      be fed without changing the snapshot, and restored again);
    - `vocab_size`: the logits' length (may exceed the tokenizer: padded embedding rows).
    """

    @property
    def vocab_size(self) -> int: ...

    def new_state(self) -> Any: ...

    def feed(self, state: Any, ids: Sequence[int]) -> Any: ...

    def snapshot(self, state: Any) -> Any: ...

    def restore(self, snapshot: Any) -> Any: ...


@dataclass(frozen=True)
class Sampler:
    """How the next id is chosen from (already masked) torch logits.

    `temperature` 0 is greedy (argmax; ties go to the lowest id). Otherwise softmax of
    `logits / temperature`, restricted to the `top_k` best when set, drawn with a
    `torch.Generator` the caller owns: the runtime makes one per session (`rng(seed)`), so
    one session's draws never depend on another's. `seed` None (the default) gives each
    session a fresh random seed; a number gives every session without its own seed that one
    (reproducible runs).
    """

    temperature: float = 0.0
    top_k: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError("top_k must be >= 1 (None: off)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def rng(self, seed: int | None = None) -> Any:
        """A fresh generator seeded with `seed` (default: this sampler's, else a random one)."""
        import secrets

        import torch

        if seed is None:
            seed = self.seed if self.seed is not None else secrets.randbits(63)
        generator = torch.Generator()
        generator.manual_seed(seed)
        return generator

    def pick(self, logits: Any, rng: Any = None) -> int:
        """One id from 1-D logits; -inf ids are never picked."""
        import torch

        logits = logits.reshape(-1).float()
        best = int(torch.argmax(logits).item())
        if logits[best].item() == float("-inf"):
            raise ValueError("every id is forbidden: nothing to sample")
        if self.greedy:
            return best
        scaled = logits / self.temperature
        if self.top_k is not None and self.top_k < scaled.shape[0]:
            kth = torch.topk(scaled, self.top_k).values[-1]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probs = torch.softmax(scaled, dim=-1).cpu()
        return int(torch.multinomial(probs, 1, generator=rng).item())


GREEDY = Sampler()


def __getattr__(name: str) -> Any:
    # the concrete backends load lazily: importing the protocol needs no torch
    if name == "HFBackend":
        from .hf import HFBackend

        return HFBackend
    if name == "ScriptedBackend":
        from .scripted import ScriptedBackend

        return ScriptedBackend
    raise AttributeError(name)
