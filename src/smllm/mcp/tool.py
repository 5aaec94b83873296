"""The `smllm` tool's call (cli-and-harnesses.md §4): arguments in, (text, isError) out.

No MCP SDK here: the server hands in the arguments as its reader parsed them from the raw
line, with the params' (name, value) pairs as they stood there when a name was repeated, and
gets back the result's text.
"""

from __future__ import annotations

from ..api.app import App
from ..api.sessions import repeated_key
from ..errors import CallError, SmllmError, internal_error
from .texts import TOOL_NAME

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..engine.records import Session
    from ..store.base import SessionStore

    #: makes, from the user store, what gives the line for (client name, the call's session)
    Watch = Callable[[SessionStore], Callable[[str | None, Session | None], str | None]]

__all__ = ["Caller", "UnknownTool"]

Pairs = list[tuple[str, "Any"]]


class UnknownTool(Exception):
    """tools/call named another tool: a JSON-RPC error -32602, `no tool NAME`."""

    def __init__(self, name: object) -> None:
        super().__init__(f"no tool {name}")


def _text_argument(arguments: dict[str, Any], name: str) -> str | None:
    """A `session` or `event` argument: None when absent, null or empty."""
    value = arguments.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise CallError(f"{name} must be a string")
    return value


def _params(
    arguments: dict[str, Any], pairs: Pairs | None, inside: tuple[str, str] | None
) -> tuple[tuple[str, Any], ...]:
    raw = arguments.get("params")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise CallError("params must be an object")
    if inside is not None:
        raise CallError(repeated_key(*inside))
    return tuple(pairs if pairs is not None else raw.items())


class Caller:
    """One long-lived App answering the tool's calls, one at a time (the server serializes)."""

    def __init__(self, config: str | None, watch: Watch | None = None) -> None:
        self.app = App(config=config)
        #: the line a reply carries when the client's hooks don't run (harness/seen.py)
        self.watch = watch(self.app.user) if watch is not None else None
        self.client: str | None = None  # the client's clientInfo name, once initialized
        #: (session key, event) of the last call that fired an event and changed something
        self.fired: tuple[str, str] | None = None

    def gave_up(self) -> bool:
        """The client stopped waiting for the last call (a cancel, a closed pipe): when it
        fired an event that was carried out, its session's next reply says so; whether one
        was recorded."""
        fired, self.fired = self.fired, None
        if fired is None:
            return False
        try:
            return self.app.mark_late(*fired)
        except Exception as exc:  # a store that fails now: the server goes on
            import sys

            sys.stderr.write(f"smllm mcp: can't record the call the client gave up on: {exc}\n")
            return False

    def call(
        self,
        name: object,
        arguments: dict[str, Any] | None,
        pairs: Pairs | None = None,
        inside: tuple[str, str] | None = None,
    ) -> tuple[str, bool]:
        """(text, isError) for one tools/call; UnknownTool for another tool's name. `pairs`:
        the params' (name, value) pairs in order, when the raw JSON repeated a name; `inside`:
        (param, key) of an object in a param's value that repeated a key (refused)."""
        if name != TOOL_NAME:
            raise UnknownTool(name)
        arguments = arguments or {}
        self.fired = None
        try:
            session = _text_argument(arguments, "session")
            event = _text_argument(arguments, "event")
            params = _params(arguments, pairs, inside)
            if event is None:
                result = self.app.view(session)
            else:
                result = self.app.fire(session, event, params, source="agent", harness="mcp")
                if result.ok and result.session is not None:
                    self.fired = (result.session.key, event)
            text = result.text()
            if self.watch is not None:
                note = self.watch(self.client, result.session)
                if note is not None:
                    text = f"{note}\n{text}"
            return text, not result.ok
        except SmllmError as exc:  # call errors, a busy or broken store: never a crash
            return f"error: {exc}", True
        except Exception as exc:  # an internal error, as the CLI words it: never a traceback
            return f"error: {internal_error(exc)}", True
