"""The SMI runtime: one model, many sessions, each with its own state, fed incrementally.

A `Runtime` holds what sessions share and never mutate (the backend's model, the compiler,
the parser factory, the policy, the sampler's settings); `runtime.session()` makes a `Session`
with a fresh backend state (seed 003: a fresh state is the sequence-memory boundary; nothing
textual resets it). A turn:

1. checks the runtime transmission (`stream.check`, runtime side only) and applies it: a CTRL
   with `reasoning` sets the reasoning in force, CAPS blocks (merged, if several) replace the
   capabilities, and the OBS blocks must answer every ACT of the previous turn exactly once;
2. feeds only the new ids: the compiled transmission (with the `"\\n"` owed to the model's
   last `<|eot|>`, and its own `<|eot|>` `"\\n"`), in one call;
3. generates id by id under the `BudgetProcessor` until `<|eot|>`, feeding each id back and
   parsing it with a fresh `StreamParser`; at `max_new_tokens` the runtime closes the
   transmission itself with `<|eot|>` (`TurnResult.truncated`);
4. validates every ACT against the capabilities (`caps.check_act`), runs the allowed ones
   concurrently (asyncio; sync runners in threads), never runs a refused one, and answers each
   ACT with exactly one OBS, in completion order (refusals first: they complete at once).

A backend that runs the token loop itself (`GeneratesTurns`: a serving engine, see
docs/smi-serving.md) gets the budget to apply per step; the runtime then replays the ids it
returns through a fresh budget and refuses the turn if any was not allowed.

`Session.turn` is a coroutine (actions are awaited); generation runs in a worker thread under
the runtime's lock, so one session's generation never blocks another's running actions, and
one model object is never run by two threads at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .backends import GREEDY, Backend, Sampler
from .budget import BudgetProcessor, Phase
from .caps import Action, Capabilities, Ledger, Policy, Refusal, obs_block
from .parser import EndOfTransmission
from .stream import Block, SmiError, Transmission, check
from .tokens import Kind, TokenIds

__all__ = [
    "ActionRunner",
    "Compiles",
    "GeneratesTurns",
    "Parser",
    "Runtime",
    "Session",
    "TurnResult",
]


@runtime_checkable
class Compiles(Protocol):
    """What the runtime needs of `compile.Compiler`."""

    def compile_runtime(
        self, transmission: Transmission, *, after_model_eot: bool
    ) -> list[int]: ...


@runtime_checkable
class GeneratesTurns(Protocol):
    """A backend that runs the token loop itself (a serving engine: the loop can't be a
    Python round trip per token). It feeds `prompt` onto `state`, then generates with
    `budget.apply` on each step's logits and `budget.observe` on each sampled id, stopping
    after `<|eot|>` or `max_new_tokens` ids, and leaves every generated id in the state. The
    runtime replays the ids through a fresh budget and refuses any it would have forbidden."""

    def generate_turn(
        self,
        state: Any,
        prompt: Sequence[int],
        budget: BudgetProcessor,
        sampler: Sampler,
        rng: Any,
        max_new_tokens: int,
    ) -> Sequence[int]: ...


class Parser(Protocol):
    """What the runtime needs of `parser.StreamParser` (side "model")."""

    def feed(self, token_ids: int | Iterable[int]) -> Sequence[object]: ...


#: makes the parser for one model transmission, given the reasoning in force
ParserFactory = Callable[[Any], Parser]
#: compiles one runtime transmission: (transmission, after_model_eot) -> ids
FeedFn = Callable[[Transmission, bool], Sequence[int]]


@runtime_checkable
class ActionRunner(Protocol):
    """Runs one validated action: `(True, content)` or `(False, error)` (error: a dict with
    `type` and `message`, or a message). An exception becomes a `runtime_error` OBS."""

    async def run(self, action: Action) -> tuple[bool, Any]: ...


Runner = ActionRunner | Callable[[Action], "Awaitable[tuple[bool, Any]] | tuple[bool, Any]"]


@dataclass(frozen=True)
class TurnResult:
    """One turn: the model's transmission and ids, its ACTs in order (`actions[i]` the parsed
    action, None where it couldn't be read; `refusals[i]` why it didn't run, None where it
    ran), the OBS transmission answering them in completion order (None without ACT), and
    what it cost.

    `fed_tokens` counts every id fed to the backend this turn (the runtime transmission's
    ids and each generated id); `prompt_tokens` the runtime part only.
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


class Runtime:
    """What sessions share. `compiler` is a `compile.Compiler` (or any object with
    `compile_runtime`) or a function `(transmission, after_model_eot) -> ids`;
    `parser_factory(reasoning)` makes a model-side `StreamParser`; `actions` runs allowed
    ACTs; `forbid` adds ids the model may never generate (a base vocabulary's own specials,
    padded embedding rows)."""

    def __init__(
        self,
        backend: Backend,
        compiler: Compiles | FeedFn,
        parser_factory: ParserFactory,
        ids: TokenIds,
        *,
        actions: Runner | None = None,
        caps_policy: Policy | None = None,
        sampler: Sampler = GREEDY,
        max_new_tokens: int = 512,
        action_timeout: float | None = None,
        strict: bool = True,
        forbid: Iterable[int] = (),
        generate_in_thread: bool = True,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        self.backend = backend
        if isinstance(compiler, Compiles):
            compile_runtime = compiler.compile_runtime

            def feed_fn(t: Transmission, after: bool) -> Sequence[int]:
                return compile_runtime(t, after_model_eot=after)

            self._compile: FeedFn = feed_fn
        else:
            self._compile = compiler
        self.parser_factory = parser_factory
        self.ids = ids
        self.actions = actions
        self.caps_policy = caps_policy
        self.sampler = sampler
        self.max_new_tokens = max_new_tokens
        self.action_timeout = action_timeout
        self.strict = strict
        self.forbid = frozenset(forbid)
        self.generate_in_thread = generate_in_thread
        self._lock = threading.Lock()

    def session(self, *, session_id: str | None = None, seed: int | None = None) -> Session:
        """A new session with a fresh model state. `seed` seeds its sampler (default: the
        sampler's seed), so a session's draws depend on nothing another session does."""
        return Session(self, session_id or uuid.uuid4().hex, seed)

    def compile(self, transmission: Transmission, after_model_eot: bool) -> list[int]:
        return [int(i) for i in self._compile(transmission, after_model_eot)]


class Session:
    """One conversation's state. Made by `Runtime.session()`; never shares its state object
    with another session. `turn` is not re-entrant: one turn at a time per session."""

    def __init__(self, runtime: Runtime, session_id: str, seed: int | None) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.state: Any = runtime.backend.new_state()
        self.rng: Any = None if runtime.sampler.greedy else runtime.sampler.rng(seed)
        self.reasoning: Any = None
        self.caps = Capabilities()  # nothing declared: every ACT is refused
        self.ledger = Ledger()  # every ACT id of the session, answered or pending
        self.history: list[Transmission] = []
        self.turns = 0
        self._after_model_eot = False
        #: why a turn failed mid-generation (the session refuses further turns), or None
        self.failed: str | None = None
        self._budget = BudgetProcessor(runtime.ids, None, extra_forbidden=runtime.forbid)
        self._busy = False

    # -- the turn ---------------------------------------------------------------------------

    async def turn(self, transmission: Transmission) -> TurnResult:
        """Feed one runtime transmission, generate the model's, run its actions."""
        if self._busy:
            raise RuntimeError(f"session {self.session_id} is already in a turn")
        if self.failed is not None:
            raise RuntimeError(
                f"session {self.session_id} failed in a turn ({self.failed}); its state is "
                "no longer a known sequence: start a new session"
            )
        self._busy = True
        try:
            apply = self._accept(transmission)
            prompt = self.runtime.compile(transmission, self._after_model_eot)
            apply()  # only once the transmission checked and compiled
            try:
                if self.runtime.generate_in_thread:
                    gen = await asyncio.to_thread(self._generate_locked, prompt)
                else:
                    gen = self._generate_locked(prompt)
            except BaseException as exc:  # the state took part of a turn: never reuse it
                self.failed = f"{type(exc).__name__}: {exc}"
                raise
            self.history.append(transmission)
            self.history.append(gen.model)
            self._after_model_eot = True
            self.turns += 1
            actions, refusals, obs = await self._act(gen.model)
            return TurnResult(
                model=gen.model,
                generated=tuple(gen.ids),
                actions=tuple(actions),
                refusals=tuple(refusals),
                obs=obs,
                fed_tokens=len(prompt) + len(gen.ids),
                prompt_tokens=len(prompt),
                truncated=gen.truncated,
                events=tuple(gen.events),
            )
        finally:
            self._busy = False

    def _accept(self, transmission: Transmission) -> Callable[[], None]:
        """Check the runtime transmission; the function returned applies its CTRL, CAPS and
        OBS answers (nothing changes if any check, or the compiler, refuses it)."""
        if transmission.side != "runtime":
            raise SmiError("a session turn takes a runtime transmission (ctrl … obs blocks)")
        reasoning = check([transmission], strict=self.runtime.strict)
        answered = self._answered(transmission)
        missing = [a for a in self.ledger.pending() if a not in answered]
        if missing:
            raise SmiError(f"no OBS answers ACT {', '.join(missing)} (every ACT gets one)")
        caps = [b for b in transmission.blocks if b.kind is Kind.CAPS]
        new_caps = Capabilities.from_payloads([b.text for b in caps]) if caps else self.caps

        def apply() -> None:
            for act_id in answered:
                self.ledger.answer(act_id)
            self.caps = new_caps
            if reasoning is not None:
                self.reasoning = reasoning

        return apply

    def _answered(self, transmission: Transmission) -> list[str]:
        """The ACT ids this transmission's OBS blocks answer; an OBS naming an ACT that awaits
        no observation (answered already, or never made) is refused."""
        pending = set(self.ledger.pending())
        answered: list[str] = []
        for block in transmission.blocks:
            if block.kind is not Kind.OBS or not block.is_text:
                continue
            try:
                value = json.loads(block.text)
            except ValueError:
                continue  # an observation that isn't JSON answers no ACT
            cause = value.get("caused_by") if isinstance(value, dict) else None
            if cause is None:
                continue  # an environment observation nobody asked for
            if not isinstance(cause, str) or cause in answered or cause not in pending:
                raise SmiError(f"an OBS for ACT {cause!r}, which awaits no observation")
            answered.append(cause)
        return answered

    def _generate_locked(self, prompt: list[int]) -> _Generated:
        with self.runtime._lock:
            return self._generate(prompt)

    def _generate(self, prompt: list[int]) -> _Generated:
        rt = self.runtime
        eot = rt.ids[Kind.EOT]
        backend, budget, sampler = rt.backend, self._budget, rt.sampler
        budget.reset(self.reasoning)
        parser = rt.parser_factory(self.reasoning)
        ids: list[int] = []
        events: list[object] = []
        if isinstance(backend, GeneratesTurns):
            ids = [
                int(i)
                for i in backend.generate_turn(
                    self.state, prompt, budget, sampler, self.rng, rt.max_new_tokens
                )
            ]
            self._verify(ids)
            events.extend(parser.feed(ids))
        else:
            logits = backend.feed(self.state, prompt)
            for _ in range(rt.max_new_tokens):
                token = sampler.pick(budget.apply(logits), self.rng)
                budget.observe(token)
                ids.append(token)
                events.extend(parser.feed(token))
                logits = backend.feed(self.state, [token])
                if token == eot:
                    break
        truncated = not ids or ids[-1] != eot
        if truncated:  # the runtime ends the transmission: trusted code inserts the id
            ids.append(eot)
            events.extend(parser.feed(eot))
            backend.feed(self.state, [eot])
        ends = [e for e in events if isinstance(e, EndOfTransmission)]
        if len(ends) != 1:
            raise SmiError(f"the model's transmission parsed into {len(ends)} transmissions")
        return _Generated(ends[0].transmission, ids, events, truncated)

    def _verify(self, ids: list[int]) -> None:
        """A backend that ran the loop itself is checked, not trusted: its ids are replayed
        through a fresh budget (the seed: the runtime MUST enforce the limits)."""
        rt = self.runtime
        if len(ids) > rt.max_new_tokens:
            raise SmiError(
                f"the backend generated {len(ids)} ids (max_new_tokens {rt.max_new_tokens})"
            )
        replay = BudgetProcessor(rt.ids, self.reasoning, extra_forbidden=rt.forbid)
        for n, token in enumerate(ids):
            if replay.phase is Phase.DONE:
                raise SmiError(f"the backend generated ids after <|eot|> (id {n})")
            if not replay.allows(token):
                raise SmiError(
                    f"the backend generated id {token} where the budget forbids it (id {n})"
                )
            replay.observe(token)

    # -- actions ----------------------------------------------------------------------------

    async def _act(
        self, model: Transmission
    ) -> tuple[list[Action | None], list[Refusal | None], Transmission | None]:
        acts = [b for b in model.blocks if b.kind is Kind.ACT]
        if not acts:
            return [], [], None
        actions: list[Action | None] = []
        refusals: list[Refusal | None] = []
        done: list[Block] = []
        tasks: list[asyncio.Task[Block]] = []
        for block in acts:
            # read, check and issue an id (the model's, or raw-N): one OBS whatever happens
            admission = self.ledger.admit(block, self.caps, self.runtime.caps_policy)
            refusal = admission.refusal
            if refusal is None and self.runtime.actions is None:
                refusal = Refusal("unavailable", "this runtime runs no actions", admission.id)
            actions.append(admission.action)
            refusals.append(refusal)
            if refusal is not None or admission.action is None:
                assert refusal is not None
                done.append(obs_block(admission.id, False, error=refusal))
            else:
                tasks.append(asyncio.create_task(self._run(admission.id, admission.action)))
        for next_done in asyncio.as_completed(tasks):
            done.append(await next_done)
        return actions, refusals, Transmission(tuple(done))

    async def _run(self, act_id: str, action: Action) -> Block:
        """Run one admitted action; whatever happens, its one OBS."""
        rt = self.runtime
        try:
            coro = _call(rt.actions, action)
            if rt.action_timeout is not None:
                ok, value = await asyncio.wait_for(coro, rt.action_timeout)
            else:
                ok, value = await coro
            if ok:
                return obs_block(act_id, True, value)
            return obs_block(act_id, False, error=_error(value))
        except TimeoutError:
            error = {"type": "timeout", "message": f"no result in {rt.action_timeout} s"}
        except Exception as exc:  # the runner's failure is the model's observation
            error = {"type": "runtime_error", "message": f"{type(exc).__name__}: {exc}"[:500]}
        return obs_block(act_id, False, error=error)


@dataclass
class _Generated:
    model: Transmission
    ids: list[int]
    events: list[object]
    truncated: bool


async def _call(runner: Runner | None, action: Action) -> tuple[bool, Any]:
    if runner is None:
        raise RuntimeError("no action runner")
    if isinstance(runner, ActionRunner):
        return await runner.run(action)
    if asyncio.iscoroutinefunction(runner):
        result = await runner(action)
    else:
        result = await asyncio.to_thread(runner, action)
        if asyncio.iscoroutine(result):
            result = await result
    ok, value = result
    return bool(ok), value


def _error(value: Any) -> Refusal | dict[str, str]:
    """A runner's error as an OBS error: a Refusal, a {type, message} dict, or a message."""
    if isinstance(value, Refusal):
        return value
    if isinstance(value, dict) and set(value) == {"type", "message"}:
        return {"type": str(value["type"]), "message": str(value["message"])}
    return {"type": "action_error", "message": str(value)}
