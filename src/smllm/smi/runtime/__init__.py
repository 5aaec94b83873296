"""The SMI runtime: one model, many sessions, each with its own state, fed incrementally.

A `Runtime` holds what sessions share and never mutate (the backend's model, the compiler,
the parser factory, the policy, the sampler's settings, the constraint factory);
`runtime.session(metadata=...)` makes a `Session` with a fresh backend state (seed 003: a
fresh state is the sequence-memory boundary; nothing textual resets it) and its own sampler
seed. A turn:

1. checks the runtime transmission (`stream.check`, runtime side only) and applies it: a CTRL
   with `reasoning` sets the reasoning in force (a `fixed` mode without `max_tokens` gets the
   runtime's `fixed_think_tokens`), CAPS blocks (merged, if several) replace the
   capabilities, and the OBS blocks must answer every ACT of the previous turn exactly once;
   a turn the model's context can't hold (`Bounded` backends: KV models) is refused with
   `ContextFull` before anything is fed or applied;
2. feeds only the new ids: the compiled transmission (with the `"\\n"` owed to the model's
   last `<|eot|>`, and its own `<|eot|>` `"\\n"`), in one call;
3. generates id by id under the `BudgetProcessor` and the turn's `TurnConstraint` (when the
   runtime has a `constraint` factory) until `<|eot|>`, feeding each id back and parsing it
   with a fresh `StreamParser`; at `max_new_tokens`, or when the context has room only for
   `<|eot|>`, the runtime closes the transmission itself (`TurnResult.truncation` says why);
4. validates every ACT against the capabilities and the policy (which sees the session:
   `caps.SessionInfo`), runs the allowed ones concurrently (asyncio; sync runners in
   threads), never runs a refused one, and answers each ACT with exactly one OBS
   (`caps.answer`), in completion order (refusals first: they complete at once).

`Session.turn` returns the `TurnResult`; `Session.stream` is the same turn as an async
iterator of the parser's events, each OBS as it completes, then the `TurnResult`.

A backend that runs the token loop itself (`GeneratesTurns`: a serving engine, see
docs/smi/serving.md) gets the budget and the constraint to apply per step; the runtime then
replays the ids it returns through fresh ones and refuses the turn if any was not allowed.

Generation runs in a worker thread under the runtime's lock, so one session's generation never
blocks another's running actions, and one model object is never run by two threads at once.
Rooms inside: `types` (protocols, results), `generate` (the token loop), `acts` (actions),
`session` (`Runtime`, `Session`).
"""

from .session import DEFAULT_FIXED_THINK_TOKENS, Runtime, Session
from .types import (
    ActionRunner,
    Bounded,
    Compiles,
    ConstraintFactory,
    ContextFull,
    GeneratesTurns,
    Parser,
    TurnConstraint,
    TurnResult,
)

__all__ = [
    "DEFAULT_FIXED_THINK_TOKENS",
    "ActionRunner",
    "Bounded",
    "Compiles",
    "ConstraintFactory",
    "ContextFull",
    "GeneratesTurns",
    "Parser",
    "Runtime",
    "Session",
    "TurnConstraint",
    "TurnResult",
]
