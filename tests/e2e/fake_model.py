"""A scripted fake model on 127.0.0.1 for the real clients (wire.py has its three formats).

Every request that offers tools (a "main" turn) takes the script's next step; requests without
tools (OpenCode's title request, Claude's token count) get a plain text and take none. A step
first checks that the request carries every text it expects (each inside one string of the
request body, such as a tool result or an injected context); when one is missing, or a tool it
calls isn't offered, the model records the mismatch and ends the turn instead, so a client
that went off script stops at once and the test names the step. Once the steps run out, main
turns end with a plain text too.

`{{session}}` in an expected text or a call's arguments becomes the session key of the latest
`<smllm>` header the request carries (the session-start context, or an earlier tool result).
Every request is kept (`requests`) and written to the log folder for a post-mortem."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from e2e import wire

SESSION = "{{session}}"
HEADER_KEY = re.compile(r"<smllm>\nsession (sm-[0-9a-z]{6})\b")
OFF_SCRIPT = "(fake model: off script, ending the turn)"
DONE_TEXT = "(fake model: the script is over)"


@dataclass(frozen=True)
class Call:
    tool: str  # a client's tool name, or a short one that wire.resolve finds (e.g. "smllm")
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Step:
    expect: tuple[str, ...] = ()
    text: str = ""
    calls: tuple[Call, ...] = ()
    label: str = ""  # what the step plays, for messages


@dataclass
class Request:
    number: int
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    strings: list[str]  # every string in the body, in order
    step: int | None  # the script step it took, None for an auxiliary request or an extra turn
    tools: list[str] = field(default_factory=list)


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, depth first, in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


def fill(value: Any, key: str) -> Any:
    """VALUE with every `{{session}}` inside its strings replaced by KEY."""
    if isinstance(value, str):
        return value.replace(SESSION, key)
    if isinstance(value, dict):
        return {k: fill(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, key) for v in value]
    return value


class FakeModel:
    """Serves the script on 127.0.0.1 from a daemon thread; use as a context manager."""

    def __init__(self, logdir: Path, steps: list[Step] | None = None) -> None:
        self.steps = steps or []  # may be set until the first request
        self.logdir = logdir
        self.requests: list[Request] = []
        self.mismatches: list[str] = []
        self.taken = 0  # steps used up
        self.changed = threading.Condition()
        logdir.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait(self, done: int, timeout: float) -> bool:
        """Wait until DONE steps are used up (or a mismatch ends the script); False on timeout."""
        with self.changed:
            return self.changed.wait_for(
                lambda: self.taken >= done or bool(self.mismatches), timeout
            )

    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.tools]

    def take(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> wire.Reply:
        """Record the request and choose its reply (under the lock: one request at a time)."""
        with self.changed:
            strings = list(strings_of(body))
            offered = wire.tool_names(body)
            number = len(self.requests) + 1
            request = Request(number, path, headers, body, strings, None, offered)
            self.requests.append(request)
            reply = wire.Reply(DONE_TEXT, ())
            if offered and self.taken < len(self.steps) and not self.mismatches:
                reply = self._play(request, self.steps[self.taken])
            self._log(request, reply)
            self.changed.notify_all()
            return reply

    def _play(self, request: Request, step: Step) -> wire.Reply:
        index = self.taken
        name = f"step {index} ({step.label})" if step.label else f"step {index}"
        keys = [m for s in request.strings for m in HEADER_KEY.findall(s)]
        key = keys[-1] if keys else ""
        expected = [fill(e, key) for e in step.expect]
        missing = [e for e in expected if not any(e in s for s in request.strings)]
        if missing:
            self.mismatches.append(f"request {request.number}, {name}: lacks {missing[0]!r}")
            return wire.Reply(OFF_SCRIPT, ())
        calls: list[wire.ToolCall] = []
        for call in step.calls:
            tool = wire.resolve(call.tool, request.tools)
            if tool is None:
                self.mismatches.append(
                    f"request {request.number}, {name}: no tool {call.tool!r} in {request.tools}"
                )
                return wire.Reply(OFF_SCRIPT, ())
            calls.append(wire.ToolCall(tool, fill(call.arguments, key)))
        request.step = index
        self.taken += 1
        return wire.Reply(step.text, tuple(calls))

    def _log(self, request: Request, reply: wire.Reply) -> None:
        record = {
            "path": request.path,
            "headers": request.headers,
            "step": request.step,
            "reply": {"text": reply.text, "calls": [c.__dict__ for c in reply.calls]},
            "body": request.body,
        }
        name = f"{request.number:03d}.json"
        (self.logdir / name).write_text(json.dumps(record, indent=1))


def _handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            else:
                self._json({"error": {"message": "not found"}}, 404)

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(size) or b"{}")
            except ValueError:
                body = {}
            if self.path.split("?")[0].endswith("/count_tokens"):
                self._json({"input_tokens": 42})
                return
            api = wire.api_of(self.path)
            if api is None or not isinstance(body, dict):
                self._json({"error": {"message": f"unknown path {self.path}"}}, 404)
                return
            reply = model.take(self.path, dict(self.headers.items()), body)
            events = wire.ENCODERS[api](reply, str(body.get("model", "fake-model")))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {text}\n\n".encode())
            self.wfile.flush()

        def _json(self, value: Any, code: int = 200) -> None:
            data = json.dumps(value).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def is_tool_result(node: dict[str, Any]) -> bool:
    """A tool's answer in any of the three formats: an Anthropic `tool_result` block, a
    Responses `function_call_output` item, a Chat Completions `tool` message."""
    return node.get("type") in ("tool_result", "function_call_output") or node.get("role") == "tool"


def split_texts(
    value: Any, into: tuple[list[str], list[str]] | None = None
) -> tuple[list[str], list[str]]:
    """The strings of a request body: (those inside tool results, all the others)."""
    results, others = into if into is not None else ([], [])
    if isinstance(value, dict):
        if is_tool_result(value):
            results.extend(strings_of(value))
            return results, others
        for item in value.values():
            split_texts(item, (results, others))
    elif isinstance(value, list):
        for item in value:
            split_texts(item, (results, others))
    elif isinstance(value, str):
        others.append(value)
    return results, others
