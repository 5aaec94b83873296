"""What the runtime needs of its parts (protocols), and what a turn gives back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..backends import Sampler
from ..budget import BudgetProcessor
from ..caps import Action, Refusal, SessionInfo
from ..stream import SmiError, Transmission

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "ActionRunner",
    "Bounded",
    "Compiles",
    "ConstraintFactory",
    "ContextFull",
    "FeedFn",
    "GeneratesTurns",
    "Parser",
    "ParserFactory",
    "Runner",
    "TurnConstraint",
    "TurnResult",
]


@runtime_checkable
class Compiles(Protocol):
    """What the runtime needs of `compile.Compiler`."""

    def compile_runtime(
        self, transmission: Transmission, *, after_model_eot: bool
    ) -> list[int]: ...


class TurnConstraint(Protocol):
    """A grammar over one turn's generated ids (constrained decoding: `constrain`), combined
    with the budget's mask: `apply` masks 1-D torch float logits (forbidden ids at -inf, a
    copy or in place), `observe` advances on the sampled id, `allows` says whether an id may
    come next (replaying the ids a `GeneratesTurns` backend generated)."""

    def apply(self, logits: Any) -> Any: ...

    def observe(self, token_id: int) -> None: ...

    def allows(self, token_id: int) -> bool: ...


#: makes a turn's constraint, called when the turn's generation starts (after the runtime
#: transmission applied: `session.caps` and `session.reasoning` are this turn's); None: none
ConstraintFactory = Callable[["Session"], TurnConstraint | None]


@runtime_checkable
class GeneratesTurns(Protocol):
    """A backend that runs the token loop itself (a serving engine: the loop can't be a
    Python round trip per token). It feeds `prompt` onto `state`, then generates with
    `budget.apply` and then `constraint.apply` (when given) on each step's logits, and
    `budget.observe` and `constraint.observe` on each sampled id, stopping after `<|eot|>` or
    `max_new_tokens` ids, and leaves every generated id in the state. `constraint` is passed
    only when the runtime has one (a backend without the parameter works without). The
    runtime replays the ids through a fresh budget and constraint and refuses any either would
    have forbidden."""

    def generate_turn(
        self,
        state: Any,
        prompt: Sequence[int],
        budget: BudgetProcessor,
        sampler: Sampler,
        rng: Any,
        max_new_tokens: int,
    ) -> Sequence[int]: ...


@runtime_checkable
class Bounded(Protocol):
    """A backend whose states hold a bounded number of ids (a KV model's positions):
    `room(state)` is how many more ids `state` can take, None where there is no bound (a
    recurrent state: Mamba, RWKV)."""

    def room(self, state: Any) -> int | None: ...


class Parser(Protocol):
    """What the runtime needs of `parser.StreamParser` (side "model")."""

    def feed(self, token_ids: int | Iterable[int]) -> Sequence[object]: ...


#: makes the parser for one model transmission, given the reasoning in force
ParserFactory = Callable[[Any], Parser]
#: compiles one runtime transmission: (transmission, after_model_eot) -> ids
FeedFn = Callable[[Transmission, bool], Sequence[int]]


@runtime_checkable
class ActionRunner(Protocol):
    """Runs one validated action for a session (`session.id`, `.caps`, `.metadata`: whom it
    runs for): `(True, content)` or `(False, error)` (error: a dict with `type` and `message`,
    a `Refusal`, or a message). An exception becomes a `runtime_error` OBS."""

    async def run(self, action: Action, session: SessionInfo) -> tuple[bool, Any]: ...


Runner = (
    ActionRunner | Callable[[Action, SessionInfo], "Awaitable[tuple[bool, Any]] | tuple[bool, Any]"]
)


class ContextFull(SmiError):
    """The model's context can't take this turn (a KV model's positions): nothing was fed or
    applied, and the session can go on with a shorter transmission."""

    def __init__(self, message: str, room: int) -> None:
        super().__init__(message)
        #: ids the state could still take when the turn was refused
        self.room = room


@dataclass(frozen=True)
class TurnResult:
    """One turn: the model's transmission and ids, its ACTs in order (`actions[i]` the parsed
    action, None where it couldn't be read; `refusals[i]` why it didn't run, None where it
    ran), the OBS transmission answering them in completion order (None without ACT), and
    what it cost.

    `fed_tokens` counts every id fed to the backend this turn (the runtime transmission's
    ids and each generated id); `prompt_tokens` the runtime part only (`prompt`: its ids).
    `truncated`: the runtime ended the transmission with `<|eot|>` itself; `truncation` says
    why (the `max_new_tokens` limit, or a context with no room for more), None where the model
    ended it.
    """

    model: Transmission
    generated: tuple[int, ...]
    actions: tuple[Action | None, ...]
    refusals: tuple[Refusal | None, ...]
    obs: Transmission | None
    fed_tokens: int
    prompt_tokens: int
    truncated: bool
    events: tuple[object, ...] = field(repr=False, default=())
    truncation: str | None = None
    #: the ids the runtime transmission compiled to (what was fed before generating)
    prompt: tuple[int, ...] = field(repr=False, default=())
