"""What `smllm mcp` tells its clients (cli-and-harnesses.md §4): the agent rules, the one tool,
and the `initialize` answer. Plain data: nothing here imports the MCP SDK."""

from __future__ import annotations

from .. import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "AGENT_RULES",
    "CALL_SENTENCE",
    "INPUT_SCHEMA",
    "LATEST_VERSION",
    "SUPPORTED_VERSIONS",
    "TOOL",
    "TOOL_NAME",
    "initialize_result",
    "negotiated",
]

AGENT_RULES = (
    "smllm guides your work with state machines. Each reply is one <smllm> block: its header "
    "names your session key and where you are, <instructions> says what to do in this state, "
    "and <events> lists the events you can fire. When the state's work is done, fire exactly "
    "one of those events; the reply brings the next instructions. Pass the session key from "
    "the latest header on every call, and leave it out only to start a session with enter. "
    "Before you end your turn to ask the user something or to wait for them, fire yield. Only "
    "the main agent calls smllm; never give the session key to a subagent."
)

CALL_SENTENCE = (
    "Call with { session } alone to see where you are, or with { session, event, params } to "
    "fire an event."
)

TOOL_NAME = "smllm"

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session": {
            "type": "string",
            "description": "The session key from the latest <smllm> header, such as "
            "sm-nqvfvw. Leave it out only to start a session with the event enter.",
        },
        "event": {
            "type": "string",
            "description": "The event to fire. Leave it out to see where you are.",
        },
        "params": {
            "type": "object",
            "description": "The event's params by name. Strings, except where the events "
            "list says a param takes a JSON value.",
        },
    },
}

TOOL: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": f"{AGENT_RULES}\n\n{CALL_SENTENCE}",
    "inputSchema": INPUT_SCHEMA,
}

#: the versions answered as asked; any other is answered with the latest. Never 2026-07-28:
#: Claude Code drops a server that answers `initialize` with it (real-clients.md)
SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = "2025-11-25"


def negotiated(asked: object) -> str:
    return asked if isinstance(asked, str) and asked in SUPPORTED_VERSIONS else LATEST_VERSION


def initialize_result(params: object) -> dict[str, Any]:
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    return {
        "protocolVersion": negotiated(asked),
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "smllm", "version": __version__},
        "instructions": AGENT_RULES,
    }
