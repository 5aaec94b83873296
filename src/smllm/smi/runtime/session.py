"""`Runtime` (what sessions share) and `Session` (one conversation's state and its turns)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from ..backends import GREEDY, Backend, Sampler
from ..budget import BudgetProcessor, Characters
from ..caps import Capabilities, Ledger, Policy, SessionInfo
from ..stream import Reasoning, SmiError, Transmission, check
from ..tokens import Kind, TokenIds
from .acts import act
from .generate import Generated, Sink, generate, room_left
from .types import Compiles, ConstraintFactory, FeedFn, ParserFactory, Runner, TurnResult

__all__ = ["DEFAULT_FIXED_THINK_TOKENS", "Runtime", "Session"]

#: the THINK budget of a `fixed` reasoning mode whose CTRL gives no `max_tokens`
DEFAULT_FIXED_THINK_TOKENS = 256
_DONE = object()


class Runtime:
    """What sessions share. `compiler` is a `compile.Compiler` (or any object with
    `compile_runtime`) or a function `(transmission, after_model_eot) -> ids`;
    `parser_factory(reasoning)` makes a model-side `StreamParser`; `actions` runs allowed
    ACTs (`run(action, session)`); `caps_policy(action, session)` has the last say over each;
    `forbid` adds ids the model may never generate (a base vocabulary's own specials, padded
    embedding rows); `constraint(session)` makes each turn's grammar (constrained decoding,
    None: the budget alone); `fixed_think_tokens` is the THINK budget of a `fixed` reasoning
    mode without `max_tokens`; `characters` (the vocabulary's bytes per id) keeps a budget cut
    on a whole UTF-8 character."""

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
        constraint: ConstraintFactory | None = None,
        fixed_think_tokens: int = DEFAULT_FIXED_THINK_TOKENS,
        characters: Characters | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if fixed_think_tokens < 0:
            raise ValueError("fixed_think_tokens must be >= 0")
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
        self.constraint = constraint
        self.fixed_think_tokens = fixed_think_tokens
        self.characters = characters
        self._lock = threading.Lock()

    def session(
        self,
        *,
        session_id: str | None = None,
        seed: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new session with a fresh model state. `seed` seeds its sampler; without one it
        is the sampler's `seed` when set, else a fresh random one (so unseeded sessions never
        draw alike); either way `session.seed` records it. `metadata` (a tenant, a user,
        their permissions) is what the policy and the action runner see of the caller."""
        if seed is None:
            seed = self.sampler.seed if self.sampler.seed is not None else secrets.randbits(63)
        return Session(self, session_id or uuid.uuid4().hex, seed, metadata or {})

    def compile(self, transmission: Transmission, after_model_eot: bool) -> list[int]:
        return [int(i) for i in self._compile(transmission, after_model_eot)]


class Session:
    """One conversation's state. Made by `Runtime.session()`; never shares its state object
    with another session. One turn at a time: `turn` (a coroutine) or `stream` (the same
    turn, consumed as it is generated)."""

    def __init__(
        self, runtime: Runtime, session_id: str, seed: int, metadata: Mapping[str, Any]
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.seed = seed
        self.metadata: Mapping[str, Any] = MappingProxyType(dict(metadata))
        self.state: Any = runtime.backend.new_state()
        self.rng: Any = None if runtime.sampler.greedy else runtime.sampler.rng(seed)
        self.reasoning: Reasoning | None = None
        self.caps = Capabilities()  # nothing declared: every ACT is refused
        self.ledger = Ledger()  # every ACT id of the session, answered or pending
        self.history: list[Transmission] = []
        self.turns = 0
        self._after_model_eot = False
        #: why a turn failed mid-generation (the session refuses further turns), or None
        self.failed: str | None = None
        self._budget = BudgetProcessor(
            runtime.ids, None, extra_forbidden=runtime.forbid, characters=runtime.characters
        )
        self._busy = False

    @property
    def info(self) -> SessionInfo:
        """What a policy and an action runner see of this session, now."""
        return SessionInfo(self.session_id, self.caps, self.metadata, self.seed)

    # -- the turn ---------------------------------------------------------------------------

    async def turn(self, transmission: Transmission) -> TurnResult:
        """Feed one runtime transmission, generate the model's, run its actions."""
        return await self._turn(transmission, None)

    async def stream(self, transmission: Transmission) -> AsyncIterator[object]:
        """The same turn as `turn`, consumed as it is generated: the parser's events
        (`parser.BlockStart`, `PayloadText`, …, `EndOfTransmission`) as ids are generated,
        then each ACT's OBS `Block` as it is made (refusals first, then in completion order),
        and last the `TurnResult`. An error of the turn is raised from the iterator.

        Closing the iterator before the `TurnResult` (a `break`; use
        `contextlib.aclosing(session.stream(t))` to close at once) abandons the turn: the
        generation stops at its next id, running actions are cancelled, and the session is
        marked `failed` (its state holds part of a turn, or ACTs whose OBS nobody got); the
        runtime's other sessions are not held up."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()

        def sink(item: object) -> None:  # called from the generation thread too
            loop.call_soon_threadsafe(queue.put_nowait, item)

        stop = threading.Event()
        task = asyncio.ensure_future(self._turn(transmission, sink, stop))
        task.add_done_callback(lambda _: sink(_DONE))
        finished = False
        try:
            while (item := await queue.get()) is not _DONE:
                yield item
            finished = True
            yield task.result()
        finally:
            if not finished:
                if self.failed is None and not (task.done() and task.exception()):
                    self.failed = "the caller abandoned the turn's stream before its end"
                stop.set()
                task.cancel()
                with contextlib.suppress(BaseException):  # abandoned: its outcome too
                    await task

    async def _turn(
        self, transmission: Transmission, sink: Sink, stop: threading.Event | None = None
    ) -> TurnResult:
        """The one path of a turn (`turn` and `stream`): events go to `sink` as they come."""
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
            room = room_left(self, prompt)  # refuses a turn the context can't hold
            apply()  # only once the transmission checked, compiled and fits
            gen = await self._generate(prompt, room, sink, stop or threading.Event())
            self.history.append(transmission)
            self.history.append(gen.model)
            self._after_model_eot = True
            self.turns += 1
            actions, refusals, obs = await act(self, gen.model, sink)
            return TurnResult(
                model=gen.model,
                generated=tuple(gen.ids),
                actions=tuple(actions),
                refusals=tuple(refusals),
                obs=obs,
                fed_tokens=len(prompt) + len(gen.ids),
                prompt_tokens=len(prompt),
                truncated=gen.truncation is not None,
                events=tuple(gen.events),
                truncation=gen.truncation,
                prompt=tuple(prompt),
            )
        finally:
            self._busy = False

    async def _generate(
        self, prompt: list[int], room: int | None, sink: Sink, stop: threading.Event
    ) -> Generated:
        def locked() -> Generated:
            with self.runtime._lock:
                return generate(self, prompt, room, sink, stop)

        try:
            if self.runtime.generate_in_thread:
                return await asyncio.to_thread(locked)
            return locked()
        except BaseException as exc:  # the state took part of a turn: never reuse it
            if self.failed is None:
                self.failed = f"{type(exc).__name__}: {exc}"
            raise

    def _accept(self, transmission: Transmission) -> Callable[[], None]:
        """Check the runtime transmission; the function returned applies its CTRL, CAPS and
        OBS answers (nothing changes if any check, or the compiler, refuses it)."""
        if transmission.side != "runtime":
            raise SmiError("a session turn takes a runtime transmission (ctrl … obs blocks)")
        reasoning = check([transmission], strict=self.runtime.strict)
        if reasoning is not None and reasoning.mode == "fixed" and reasoning.max_tokens is None:
            # the seed leaves a fixed budget's size to the runtime: the runtime's default
            reasoning = replace(reasoning, max_tokens=self.runtime.fixed_think_tokens)
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
