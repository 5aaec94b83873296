"""`HFBackend`: a transformers causal LM as an SMI backend (transformers 5.24 state API).

How each family carries its sequence memory (verified on CPU, see the SMI notes):

- Mamba, Mamba2, GPT-2, Llama and other KV models: `model(input_ids=new, cache=cache,
  use_cache=True)` → `out.cache` (a `DynamicCache`, updated in place);
- RWKV-4: `model(input_ids=new, state=state, use_cache=True)` → `out.state` (5 tensors);
- Mamba-1 (and FalconMamba, the same mixer): feeding more than one id onto a non-empty cache
  is wrong in the torch fallback (its scan restarts from zero), so new ids go one at a time
  once the cache holds anything; the first feed of a fresh state may be any length.

Caches update in place, so a state is never shared: `new_state()` makes an empty holder and
the first feed creates the cache inside it; `snapshot`/`restore` deep-copy. Everything runs
under `torch.no_grad()`. A hand-written loop over `forward` (this) avoids `generate`'s
continuation traps (it never feeds its last sampled token; KV models need the full attention
mask).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ONE_TOKEN_FAMILIES", "RECURRENT_FAMILIES", "HFBackend", "HFState", "quiet_transformers"]


def quiet_transformers() -> None:
    """For a command line: `transformers` logs its loading (progress bars, config notes) to
    stderr, which holds a command's own messages; keep only its errors."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


#: model types whose multi-id feeds onto a non-empty cache are wrong: fed one id at a time
ONE_TOKEN_FAMILIES = frozenset({"mamba", "falcon_mamba"})
#: model types whose memory is `state=` / `.state` (RWKV-4); every other type uses `cache=`
STATE_FAMILIES = frozenset({"rwkv"})
#: model types whose memory is a fixed-size recurrent state: no bound on a session's ids
RECURRENT_FAMILIES = frozenset({"mamba", "mamba2", "falcon_mamba", "rwkv"})
#: the config keys a KV model's position limit goes by
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "n_ctx")


@dataclass
class HFState:
    """One session's memory: the model's cache or RWKV state (None before the first feed),
    the logits of the last position fed, and how many ids it has seen."""

    memory: Any = None
    logits: Any = None
    seen: int = 0
    history: list[int] = field(default_factory=list)


class HFBackend:
    """A transformers causal LM (`model.eval()` is called) behind the `Backend` protocol.

    `one_token_at_a_time` overrides the family rule (None: Mamba-1 and FalconMamba only);
    `keep_history` keeps every fed id in the state (for tests and debugging); `context` is how
    many ids a state holds (None: the config's position limit for a KV model, no bound for a
    recurrent one: `RECURRENT_FAMILIES`).
    """

    def __init__(
        self,
        model: Any,
        *,
        one_token_at_a_time: bool | None = None,
        keep_history: bool = False,
        context: int | None = None,
    ) -> None:
        self.model = model.eval()
        self.model_type = str(getattr(model.config, "model_type", ""))
        self.uses_state = self.model_type in STATE_FAMILIES
        self.one_token = (
            self.model_type in ONE_TOKEN_FAMILIES
            if one_token_at_a_time is None
            else one_token_at_a_time
        )
        self.keep_history = keep_history
        out = model.get_output_embeddings()
        self._vocab = int(out.weight.shape[0]) if out is not None else int(model.config.vocab_size)
        self.context = context if context is not None else _positions(model.config)
        if self.model_type in RECURRENT_FAMILIES and context is None:
            self.context = None

    @property
    def vocab_size(self) -> int:
        return self._vocab

    @property
    def device(self) -> Any:
        return self.model.device

    def new_state(self) -> HFState:
        return HFState()

    def room(self, state: HFState) -> int | None:
        """How many more ids `state` can take (None: no bound). A KV model fed past its
        position limit fails (GPT-2: an IndexError) or reads positions it never learnt."""
        return None if self.context is None else self.context - state.seen

    def feed(self, state: HFState, ids: Sequence[int]) -> Any:
        """Run `ids` onto `state`; the logits (1-D, float32) of the last position."""
        ids = [int(i) for i in ids]
        if not ids:
            if state.logits is None:
                raise ValueError("feed([]) on a state that has seen no ids has no logits")
            return state.logits
        import torch

        with torch.no_grad():
            if self.one_token and state.memory is not None:
                for token_id in ids:
                    self._forward(state, [token_id])
            else:
                self._forward(state, ids)
        state.seen += len(ids)
        if self.keep_history:
            state.history.extend(ids)
        return state.logits

    def _forward(self, state: HFState, ids: list[int]) -> None:
        import torch

        input_ids = torch.tensor([ids], dtype=torch.long, device=self.model.device)
        if self.uses_state:
            out = self.model(input_ids=input_ids, state=state.memory, use_cache=True)
            state.memory = out.state
        else:
            out = self.model(input_ids=input_ids, cache=state.memory, use_cache=True)
            state.memory = out.cache
        state.logits = out.logits[0, -1].float()

    def snapshot(self, state: HFState) -> HFState:
        return copy.deepcopy(state)

    def restore(self, snapshot: HFState) -> HFState:
        return copy.deepcopy(snapshot)


def _positions(config: Any) -> int | None:
    for key in _POSITION_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
