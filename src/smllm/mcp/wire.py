"""The server's own side of the stdio stream (cli-and-harnesses.md §4): reading lines, writing
messages, and the answers that need no SDK.

Each line read is sorted here before the MCP SDK sees it:

- not JSON, or JSON that isn't a JSON-RPC message: answered here (-32700, -32600);
- `initialize`, `tools/list` and `ping`: answered here at once, before the SDK (most of
  start-up's time, 1-3 s) is imported: Claude Code (`-p`) and `codex exec` send their first
  model request after 1-2 s with the tools of the servers ready by then, and no others;
- a request for any other method but `tools/call`: -32601 here (the SDK answers
  `server/discover` with -32602, and Claude Code and Copilot need -32601);
- a notification other than `notifications/initialized` and `notifications/cancelled`, or a
  response (smllm sends no requests): dropped;
- the rest goes to the SDK, a `tools/call`'s arguments left with the reader (a `Stash`) and
  replaced by a ticket: the SDK's parse would keep only the last of a repeated param name, and
  its models refuse values nested a few hundred levels deep, which the engine refuses in its
  own words; the tool's handler takes them back by the ticket.

Nothing here imports the SDK.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from ..jsontext import loads_keeping_repeats, repeat_inside
from .texts import TOOL, initialize_result

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Pairs = list[tuple[str, Any]]

__all__ = [
    "FORWARDED",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "TICKET",
    "Inbox",
    "Stash",
    "Stashed",
    "Wire",
    "error_response",
    "sort_line",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

#: what the SDK is given (requests and notifications)
FORWARDED = frozenset({"tools/call", "notifications/initialized", "notifications/cancelled"})
#: the requests answered here, and their results
_STATIC: dict[str, dict[str, Any]] = {"ping": {}, "tools/list": {"tools": [TOOL]}}


def error_response(id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


#: the one argument of a tools/call as the SDK sees it: the reader's ticket for the real ones
TICKET = "smllm-ticket"
#: how many tickets a stash keeps: one the SDK refused (never taken) is dropped this many later
_KEPT = 10_000


class Stashed:
    """A tools/call's arguments as the reader parsed them from the raw line (a plain class:
    the reader answers initialize before any record module loads)."""

    __slots__ = ("arguments", "inside", "pairs")

    def __init__(
        self,
        arguments: dict[str, Any] | None,
        pairs: Pairs | None,
        inside: tuple[str, str] | None = None,
    ) -> None:
        self.arguments = arguments
        #: the params' (name, value) pairs, when the raw JSON repeated a name
        self.pairs = pairs
        #: (param, key): a key repeated inside a param's value
        self.inside = inside


class Stash:
    """tools/call arguments, by ticket: put by the reader thread, taken by the tool's handler
    (dict operations are atomic, so no lock)."""

    def __init__(self) -> None:
        self.items: dict[int, Stashed] = {}
        self.last = 0
        #: the ids of the tool calls forwarded and not yet answered, and those of them the
        #: client cancelled (notifications/cancelled), as the reader saw them: a call runs on
        #: while a cancel arrives, and checks afterwards. A cancel for any other id is dropped
        #: (OpenCode cancels every call it already has the answer to)
        self.running: set[Any] = set()
        self.cancelled: set[Any] = set()
        self.ended = False  # the client closed its end of the input
        self.client: str | None = None  # the client's name, from initialize's clientInfo

    def put(
        self, arguments: dict[str, Any], pairs: Pairs | None, inside: tuple[str, str] | None
    ) -> int:
        self.last += 1
        self.items[self.last] = Stashed(arguments, pairs, inside)
        self.items.pop(self.last - _KEPT, None)
        return self.last

    def take(self, arguments: object) -> Stashed:
        """The arguments (and pairs) a ticket stands for; others as they are."""
        if isinstance(arguments, dict) and len(arguments) == 1:
            ticket = arguments.get(TICKET)
            if isinstance(ticket, int):
                found = self.items.pop(ticket, None)
                if found is not None:
                    return found
        return Stashed(arguments if isinstance(arguments, dict) else None, None)


def sort_line(line: bytes, stash: Stash) -> tuple[str, Any]:
    """What to do with one line of standard input (without its newline): ("reply", the
    response to write), ("forward", the message for the SDK) or ("drop", None)."""
    try:
        msg, repeated = loads_keeping_repeats(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "reply", error_response(None, PARSE_ERROR, "Parse error")
    if not isinstance(msg, dict):  # batches went with 2025-06-18; smllm never took them
        return "reply", error_response(None, INVALID_REQUEST, "Invalid Request")
    has_id = "id" in msg
    id_ = msg.get("id")
    method = msg.get("method")
    if msg.get("jsonrpc") != "2.0" or (has_id and not _valid_id(id_)):
        if "method" in msg and not has_id:
            return "drop", None  # a notification gets no answer, even a bad one
        return "reply", error_response(
            id_ if _valid_id(id_) else None, INVALID_REQUEST, "Invalid Request"
        )
    if "method" not in msg:
        return "drop", None  # a response: smllm sends no requests
    if not isinstance(method, str) or ("params" in msg and not isinstance(msg["params"], dict)):
        if not has_id:
            return "drop", None
        return "reply", error_response(id_, INVALID_REQUEST, "Invalid Request")
    if not has_id:
        if method == "notifications/cancelled":
            cancelled = msg.get("params", {}).get("requestId")
            if _valid_id(cancelled) and cancelled in stash.running:
                stash.cancelled.add(cancelled)
        return ("forward", msg) if method in FORWARDED else ("drop", None)
    if method == "initialize":
        params = msg.get("params")
        info = params.get("clientInfo") if isinstance(params, dict) else None
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            stash.client = info["name"]
        result = initialize_result(params)
        return "reply", {"jsonrpc": "2.0", "id": id_, "result": result}
    if method in _STATIC:
        return "reply", {"jsonrpc": "2.0", "id": id_, "result": _STATIC[method]}
    if method not in FORWARDED:
        return "reply", error_response(id_, METHOD_NOT_FOUND, f"Method not found: {method}")
    if method == "tools/call":
        problem = _call_shape(msg.get("params"))
        if problem is not None:  # a sentence, not the SDK's validation dump
            sys.stderr.write(f"smllm mcp: refused tools/call {json.dumps(id_)}: {problem}\n")
            return "reply", error_response(id_, INVALID_PARAMS, f"Invalid params: {problem}")
        _stash_arguments(repeated, msg.get("params"), stash)
        stash.running.add(id_)
    return "forward", msg


def _call_shape(params: object) -> str | None:
    """What is wrong with a tools/call's params (MCP's CallToolRequestParams), or None."""
    if not isinstance(params, dict):
        return "tools/call needs params: an object with the tool's name and arguments"
    if not isinstance(params.get("name"), str):
        return "params.name must be the tool's name, a string"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return "params.arguments must be an object (session, event, params)"
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return "params._meta must be an object"
    return None


def _stash_arguments(
    repeated: dict[int, list[tuple[str, Any]]], params: object, stash: Stash
) -> None:
    if not isinstance(params, dict):
        return
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        return  # null or absent: none (_call_shape refused anything else)
    given = arguments.get("params")
    pairs = repeated.get(id(given)) if isinstance(given, dict) else None
    # an object inside a param's value that repeated a key: the tool refuses the call, as the
    # CLI's --params does
    inside = repeat_inside(given, repeated) if isinstance(given, dict) else None
    params["arguments"] = {TICKET: stash.put(arguments, pairs, inside)}


class Wire:
    """The protocol stream: one message a line, written whole by one writer at a time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.broken = False

    def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        try:
            data = text.encode("utf-8") + b"\n"
        except UnicodeEncodeError:  # a lone surrogate (a client's "\ud800" echoed back) has no
            # UTF-8 form: the message in ASCII, with JSON's \uXXXX escapes
            data = json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"
        with self.lock:
            if self.broken:
                return
            try:
                while data:
                    data = data[os.write(self.fd, data) :]
            except OSError:  # the client went away: the read side ends the server
                self.broken = True


class Inbox:
    """What the reader forwards (None at the end of input), held until the server attaches a
    sink (a thread-safe callable), then passed on as it comes, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: list[dict[str, Any] | None] = []
        self.sink: Callable[[dict[str, Any] | None], object] | None = None

    def put(self, item: dict[str, Any] | None) -> None:
        with self.lock:
            if self.sink is None:
                self.held.append(item)
                return
            self.sink(item)

    def attach(self, sink: Callable[[dict[str, Any] | None], object]) -> None:
        with self.lock:
            for item in self.held:
                sink(item)
            self.held.clear()
            self.sink = sink
