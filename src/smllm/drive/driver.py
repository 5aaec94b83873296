"""The run's action runner and policy (`smi.runtime`'s `actions` and `caps_policy`): an event
ACT fires through the library API as the agent, a work tool runs in the project folder. The
runtime admits every ACT of a transmission first (the policy, in order), then runs the
admitted ones; this driver runs them one at a time, in the model's order, so a `write` of
PLAN.md lands before the `planned` whose guard tests for it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..api.app import App, Result
from ..errors import CallError
from ..smi.caps import Action, Refusal, SessionInfo

if TYPE_CHECKING:
    from .work import Work

__all__ = ["Driver", "Fired", "Worked"]

HARNESS = "run"


@dataclass(frozen=True)
class Fired:
    """One event ACT that reached the engine: its reply, or the call error's text."""

    event: str
    params: tuple[tuple[str, Any], ...]
    result: Result | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok


@dataclass(frozen=True)
class Worked:
    """One work tool ACT that ran."""

    tool: str
    arguments: Any
    ok: bool
    value: Any


@dataclass
class TurnLog:
    """What the driver did in one turn, in order."""

    fired: list[Fired] = field(default_factory=list)
    worked: list[Worked] = field(default_factory=list)
    interrupted: bool = False


class Driver:
    """Runs one run's ACTs for session `key`. `work`: the granted work tools (None: none)."""

    def __init__(self, app: App, key: str, work: Work | None = None) -> None:
        self.app = app
        self.key = key
        self.work = work
        self.work_names: frozenset[str] = frozenset(work.tools) if work is not None else frozenset()
        self.turn = TurnLog()
        self._events_admitted = 0
        self._order: asyncio.Lock | None = None
        #: True while an event's call or a shell command runs on the main thread (the
        #: interrupt handler aborts it as Ctrl-C aborts `smllm fire`)
        self.firing = False

    def begin_turn(self) -> TurnLog:
        """Start a turn's log (the previous one is returned by the caller before)."""
        self.turn = TurnLog()
        self._events_admitted = 0
        return self.turn

    # -- the policy (at admission, in the model's order) -------------------------------------

    def is_event(self, tool: str) -> bool:
        """Whether the CAPS tool `tool` fires an event (not a work tool): the constraint lets a
        transmission call one of these at most, as the policy admits."""
        return tool not in self.work_names

    def policy(self, action: Action, session: SessionInfo) -> Refusal | None:
        """One event per transmission (the engine answers each event with the next state, so a
        second event would be fired blind); a work tool's own checks (a shell command no
        --allow pattern matches); no `write` of a file that guides the run."""
        name = action.name or ""
        if self.work is not None and name in self.work_names:
            problem = self.work.refusal(name, action.arguments)
            if problem is None and name == "write":
                problem = self._guiding(action.arguments)
            return Refusal("policy_denied", problem) if problem is not None else None
        if self._events_admitted:
            return Refusal(
                "policy_denied",
                f"one event per transmission: an event was already fired in this one; fire "
                f"{name} after reading that event's result, if it is still offered",
            )
        self._events_admitted += 1
        return None

    def _guiding(self, arguments: Any) -> str | None:
        """Why a `write` may not go ahead: its path is a file the session's configs read or
        look for (the configs, their machines). The machine is the run's policy: a model that
        rewrote it could have a guard run any command, shell granted or not."""
        path = arguments.get("path") if isinstance(arguments, dict) else None
        if self.work is None or not isinstance(path, str) or "\0" in path:
            return None  # the work tool words its own refusal
        target = os.path.abspath(os.path.join(self.work.root, path))
        for name in self.app.load(self.app.session(self.key).configs).files:
            if os.path.normcase(os.path.abspath(name)) == os.path.normcase(target) or (
                os.path.exists(name) and os.path.exists(target) and os.path.samefile(name, target)
            ):
                return (
                    f"`{path}` is one of the files that guide this run (its configs and "
                    "machines): write never changes them"
                )
        return None

    # -- running ---------------------------------------------------------------------------------

    async def run(self, action: Action, session: SessionInfo) -> tuple[bool, Any]:
        if self._order is None:
            self._order = asyncio.Lock()
        async with self._order:  # FIFO: the ACTs run in the order the model wrote them
            name = action.name or ""
            if self.work is not None and name in self.work_names:
                ok, value = await self._work(name, action.arguments)
                self.turn.worked.append(Worked(name, action.arguments, ok, value))
                return ok, value
            return self.fire(name, _params(action.arguments))

    async def _work(self, name: str, arguments: Any) -> tuple[bool, Any]:
        """A work tool: read and write in a thread; shell here on the main thread, where an
        interrupt ends the command as it ends a guard (its process group killed). In a thread
        the command would run on to its timeout, and the run's end would wait for it."""
        assert self.work is not None
        if name != "shell":
            return await asyncio.to_thread(self.work.run, name, arguments)
        self.firing = True
        try:
            return self.work.run(name, arguments)
        except KeyboardInterrupt:
            self.turn.interrupted = True
            return False, {
                "type": "interrupted",
                "message": "the run was interrupted while the command ran; it was killed",
            }
        finally:
            self.firing = False

    def fire(self, event: str, params: Sequence[tuple[str, Any]]) -> tuple[bool, Any]:
        """Fire one event as the agent, here on the main thread: an interrupt mid-guard ends
        the call as it ends `smllm fire` (the guard's process group killed, nothing
        committed)."""
        params = tuple(params)
        self.firing = True
        try:
            result = self.app.fire(self.key, event, params, "agent", HARNESS)
        except CallError as exc:
            self.turn.fired.append(Fired(event, params, None, f"error: {exc}"))
            return False, {"type": "call_error", "message": f"error: {exc}"}
        except KeyboardInterrupt:
            self.turn.interrupted = True
            self.turn.fired.append(Fired(event, params, None, "interrupted"))
            return False, {
                "type": "interrupted",
                "message": "the run was interrupted while this event's call ran; nothing of it "
                "was committed",
            }
        finally:
            self.firing = False
        self.turn.fired.append(Fired(event, params, result))
        if result.ok:
            return True, result.text()
        return False, {"type": "refused", "message": result.text()}


def _params(arguments: Any) -> tuple[tuple[str, Any], ...]:
    """An event ACT's arguments as the engine's params (checked as an object by the caps)."""
    return tuple(arguments.items()) if isinstance(arguments, dict) else ()
