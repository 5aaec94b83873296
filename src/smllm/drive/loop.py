"""The run: one SMI exchange a turn between the model and the machine, until the instance
completes, the model yields or pauses, the engine ends it (a runaway stop), a limit is hit, or
the user interrupts.

Turn 1 feeds CTRL (the reasoning budget), SYS (the agent rules), CAPS (the offered events as
tools, and the work tools) and USR (the session's `<smllm>` block). Every later turn feeds only
what is new: CAPS when the offer changed, and the OBS answering each ACT (an event's reply
block; a refusal's error) or, after a stop the engine blocked, the block as an OBS of its own.
The model's state carries the rest, so the ids fed per turn stay flat.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from typing import Any, cast

from ..api.app import App, Result
from ..mcp.texts import AGENT_RULES
from ..smi.runtime import ContextFull, Runtime, TurnResult
from ..smi.runtime.session import Session
from ..smi.stream import Block, Reasoning, SmiError, Transmission
from .driver import Driver, TurnLog
from .offers import caps_value
from .report import Report, Summary, Totals, outcomes
from .transcript import Transcript

__all__ = ["Run", "ctrl_value"]

#: why a run ended, after the engine's stop was allowed or the model ended the run
ENDINGS = (
    "complete",
    "yield",
    "paused",
    "idle",
    "runaway",
    "max-turns",
    "context-full",
    "model-error",
    "interrupted",
)


def ctrl_value(reasoning: Reasoning) -> dict[str, Any]:
    """The CTRL payload for the run's reasoning budget."""
    value: dict[str, Any] = {"mode": reasoning.mode}
    if reasoning.max_tokens is not None:
        value["max_tokens"] = reasoning.max_tokens
    return {"reasoning": value}


class Run:
    """One run of session `key` (its instance entered already, or idle)."""

    def __init__(
        self,
        app: App,
        key: str,
        runtime: Runtime,
        driver: Driver,
        *,
        reasoning: Reasoning,
        max_turns: int,
        transcript: Transcript,
        report: Report,
        work_tools: Sequence[dict[str, Any]] = (),
        on_end: Callable[[Summary], None] | None = None,
    ) -> None:
        self.app = app
        self.key = key
        self.runtime = runtime
        self.driver = driver
        self.reasoning = reasoning
        self.max_turns = max_turns
        self.transcript = transcript
        self.report = report
        self.work_tools = list(work_tools)
        self.on_end = on_end
        self.totals = Totals()
        self.interrupted = False
        self._task: asyncio.Task[TurnResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._caps: dict[str, Any] | None = None
        #: the last place the session held (machine, state, instance, ref)
        self.place: dict[str, Any] = {}
        self.final: str | None = None

    # -- interrupts ----------------------------------------------------------------------------

    def on_interrupt(self, signum: int, frame: Any) -> None:
        """SIGINT: the first ends the turn (a generation stops at its next id; an event's call
        ends as `smllm fire` ends on Ctrl-C) and the run pauses its instance; a second stops
        at once: it ends an event's call in progress (the pause) as the first does, and
        anywhere else it ends the process (exit 130)."""
        halt = getattr(self.runtime.backend, "halt", None)
        if halt is not None:  # a backend that runs whole turns and can stop one (scripted)
            halt.set()  # first of all: a second SIGINT may cut this handler short
        if self.interrupted:
            if self.driver.firing:
                raise KeyboardInterrupt  # caught by the driver around the call
            # A KeyboardInterrupt here could land inside asyncio's own bookkeeping and hang
            # its cleanup; end as a kill would: each store write is one transaction, and a
            # session cut off behind its instance is recovered by its next call.
            self.report.line("error: interrupted again: stopped at once")
            os._exit(130)
        self.interrupted = True
        firing = self.driver.firing
        if not firing and self._task is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self.report.line("interrupted: ending the turn and pausing (Ctrl-C again to quit now)")
        if firing:
            raise KeyboardInterrupt  # caught by the driver around the call

    # -- the loop ------------------------------------------------------------------------------

    async def go(self) -> Summary:
        """The run, to its summary (handed to `on_end` before Ctrl-C is given back)."""
        self._loop = asyncio.get_running_loop()
        if threading.current_thread() is not threading.main_thread():
            # signals reach only the main thread: a run in another thread has no Ctrl-C
            return self._summed_up(await self._guarded_turns())
        previous = signal.signal(signal.SIGINT, self.on_interrupt)
        try:
            with _signals_wake(self._loop):
                stop, message = await self._guarded_turns()
            if self.interrupted:  # the transcript, summary and run.json go down whole
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            return self._summed_up((stop, message))
        finally:
            signal.signal(signal.SIGINT, previous)

    async def _guarded_turns(self) -> tuple[str, str]:
        try:
            return await self._turns()
        finally:
            self.transcript.save()

    def _summed_up(self, ending: tuple[str, str]) -> Summary:
        summary = self.summary(*ending)
        if self.on_end is not None:
            self.on_end(summary)
        return summary

    async def _turns(self) -> tuple[str, str]:
        session = self.runtime.session(session_id=self.key)
        view = self._look()
        transmission = self._first(view)
        blocked = False  # the last turn was a stop the engine blocked
        for number in range(1, self.max_turns + 1):
            log = self.driver.begin_turn()
            self.report.begin_turn(number, _where(view))
            started = time.monotonic()
            result, failure = await self._one(session, transmission)
            ms = (time.monotonic() - started) * 1000
            if result is None:
                self.transcript.turn(number, transmission, None, (), (), ms, failure)
                if self.interrupted:
                    return self._pause()
                if failure is not None and failure.startswith("context-full: "):
                    return "context-full", failure.removeprefix("context-full: ")
                return "model-error", failure or "the model failed"
            self._count(result, log)
            self.transcript.turn(
                number, transmission, result.model, result.prompt, result.generated, ms
            )
            view = self._look()
            self.report.turn(number, result, ms, _where(view))
            if self.interrupted or log.interrupted:
                return self._pause()
            ended = self._ended(log)
            if ended is not None:
                if ended[0] == "complete":
                    await self._last_words(session, result, view)
                elif result.obs is not None:
                    self.transcript.tail(result.obs)
                return ended
            env: str | None = None
            if not result.actions:  # no ACT at all: the model stops; the engine decides
                outcome = self.app.stop(self.key, blocked)
                if outcome.decision == "runaway":
                    return "runaway", (
                        "the model stopped again without firing an event after the engine "
                        "blocked its stop (a runaway stop); the instance stays where it is"
                    )
                if outcome.decision == "allow":
                    s = self.app.session(self.key)
                    if s.holding is not None and s.yielded:
                        return "yield", "the model stopped after yielding"
                    return "idle", "the model stopped in idle"
                env, blocked = outcome.text, True
                view = self._look()
            else:
                blocked = False
            transmission = self._next(view, result, env)
        return "max-turns", f"--max-turns {self.max_turns} reached; the instance stays where it is"

    async def _one(
        self, session: Session, transmission: Transmission
    ) -> tuple[TurnResult | None, str | None]:
        """One turn, streamed; (None, why) where it failed or was interrupted."""

        async def consume() -> TurnResult:
            items = cast("AsyncGenerator[object, None]", session.stream(transmission))
            async with contextlib.aclosing(items):
                async for item in items:
                    if isinstance(item, TurnResult):
                        return item
                    self.report.event(item)
            raise SmiError("the turn ended without its result")

        self._task = asyncio.ensure_future(consume())
        try:
            return await self._task, None
        except asyncio.CancelledError:
            if not self.interrupted:
                raise
            return None, "interrupted"
        except ContextFull as exc:
            return None, f"context-full: {exc}"
        except Exception as exc:  # the model or its backend failed: the run ends, saying why
            if self.interrupted:  # a backend the interrupt halted (scripted) stops with an error
                return None, "interrupted"
            return None, f"{type(exc).__name__}: {exc}"
        finally:
            self._task = None

    def _first(self, view: Result) -> Transmission:
        self._caps = caps_value(view, self.work_tools)
        return Transmission.of(
            [
                Block.of("ctrl", ctrl_value(self.reasoning)),
                Block.of("sys", AGENT_RULES),
                Block.of("caps", self._caps),
                Block.of("usr", view.text()),
            ]
        )

    def _next(self, view: Result, result: TurnResult, env: str | None) -> Transmission:
        blocks: list[Block] = []
        caps = caps_value(view, self.work_tools)
        if caps != self._caps:
            blocks.append(Block.of("caps", caps))
            self._caps = caps
        if result.obs is not None:
            blocks.extend(result.obs.blocks)
        if env is not None:
            blocks.append(Block.of("obs", env))
        return Transmission.of(blocks)

    def _ended(self, log: TurnLog) -> tuple[str, str] | None:
        """How the turn's accepted events end the run, if they do."""
        for fired in log.fired:
            if not fired.ok or fired.result is None:
                continue
            reply = fired.result.reply
            if reply.completed is not None:
                return "complete", f"completed {reply.completed}"
            if fired.event == "yield" and reply.yielded is not None:
                return "yield", f"yielded in {reply.yielded}"
            if fired.event == "pause":
                return "paused", "the model paused its instance"
        return None

    async def _last_words(self, session: Session, result: TurnResult, view: Result) -> None:
        """After completion, one turn with no tools for the final state's instructions (a
        summary): its OUT text is the run's `final`."""
        obs = list(result.obs.blocks) if result.obs is not None else []
        last = Transmission.of([Block.of("caps", {"tools": []}), *obs])
        log = self.driver.begin_turn()
        started = time.monotonic()
        answer, failure = await self._one(session, last)
        ms = (time.monotonic() - started) * 1000
        model = answer.model if answer is not None else None
        fed = answer.prompt if answer is not None else ()
        generated = answer.generated if answer is not None else ()
        self.transcript.turn(self.totals.turns + 1, last, model, fed, generated, ms, failure)
        if answer is not None:
            self._count(answer, log)
            self.report.turn(self.totals.turns, answer, ms, _where(view))
            said = " ".join(b.text for b in answer.model.blocks if b.kind.tag == "out")
            self.final = said or None

    def _count(self, result: TurnResult, log: TurnLog) -> None:
        t = self.totals
        t.turns += 1
        t.fed += result.prompt_tokens
        t.generated += len(result.generated)
        for _, outcome, _ in outcomes(result):
            if outcome == "ok":
                t.accepted += 1
            elif outcome != "pending":
                t.refused += 1
        t.events += sum(f.ok for f in log.fired)

    def _pause(self) -> tuple[str, str]:
        """After an interrupt: pause the held instance (unless it yielded), so that
        `smllm run --session KEY` or any harness continues it."""
        s = self.app.session(self.key)
        if s.holding is None:
            return "interrupted", "interrupted in idle"
        if s.yielded:
            return "interrupted", "interrupted; the instance had yielded and stays so"
        ok, _ = self.driver.fire("pause", ())
        if ok or self._look().reply.header.machine is None:  # a second Ctrl-C may cut the
            # pause off after its instance write: the instance is paused all the same
            return "interrupted", "interrupted; paused the instance"
        return "interrupted", "interrupted; the instance could not be paused and stays active"

    def _look(self) -> Result:
        """The session's view now (what `smllm session show` prints), noting where it is."""
        view = self.app.view(self.key)
        location = view.location()
        if location is not None:
            self.place = location
        return view

    def summary(self, stop: str, message: str) -> Summary:
        view = self._look()
        p = self.place
        if p.get("machine") and p.get("instance"):  # where the run's instance is now (DONE…)
            now = view.stores.instance(p["machine"], p["instance"])
            if now is not None:
                p = {**p, "state": now.state}
        return Summary(
            session=self.key,
            stop=stop,
            message=message,
            machine=p.get("machine"),
            state=p.get("state"),
            instance=p.get("instance"),
            ref=p.get("ref"),
            totals=self.totals,
            final=self.final,
            transcript=self.transcript.turns_path,
        )


@contextlib.contextmanager
def _signals_wake(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While the loop waits, a SIGINT the kernel hands to another thread (the generation's)
    wakes it: else its handler would wait for that thread's next callback, up to a whole
    turn. Python's C-level handler writes to this socket, which the loop watches, and the
    main thread then runs the handler."""
    reading, writing = socket.socketpair()
    reading.setblocking(False)
    writing.setblocking(False)
    previous = signal.set_wakeup_fd(writing.fileno(), warn_on_full_buffer=False)
    loop.add_reader(reading.fileno(), _drain, reading)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        loop.remove_reader(reading.fileno())
        reading.close()
        writing.close()


def _drain(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # BlockingIOError: read empty
        while sock.recv(512):
            pass


def _where(view: Result) -> str:
    header = view.reply.header
    if header.machine is None:
        return "idle"
    return f"{header.machine} › {header.state}"
