"""The MCP server's reader and the tool's handler, in process (smllm/mcp/wire.py, tool.py): a
tools/call's arguments wait in a stash under a ticket until the handler takes them back, and a
stash never grows without bound; the handler fires as the agent (`source: agent`, harness
`mcp`), puts the watch's line first, words an internal error as every surface does; a call the
client gave up on is recorded once, or the server says on stderr why it couldn't be, and goes
on."""

from __future__ import annotations

from typing import Any

import pytest

from smllm.mcp import wire
from smllm.mcp.tool import Caller
from smllm.mcp.wire import TICKET, Stash


def test_tickets_count_up_and_take_gives_back_what_was_put() -> None:
    stash = Stash()
    inside = ("files", "a")
    first = stash.put({"event": "go"}, [("size", "a"), ("size", "b")], inside)
    second = stash.put({"event": "done"}, None, None)
    assert (first, second) == (1, 2)
    taken = stash.take({TICKET: first})
    assert (taken.arguments, taken.pairs, taken.inside) == (
        {"event": "go"},
        [("size", "a"), ("size", "b")],
        inside,
    )
    assert stash.take({TICKET: second}).arguments == {"event": "done"}
    # taken once: a ticket shown again is an argument like any other
    again = stash.take({TICKET: first})
    assert (again.arguments, again.pairs, again.inside) == ({TICKET: first}, None, None)


def test_a_fresh_stash_has_seen_no_client_and_no_end() -> None:
    stash = Stash()
    assert (stash.ended, stash.client, stash.running, stash.cancelled) == (
        False,
        None,
        set(),
        set(),
    )


def test_a_stash_keeps_the_last_tickets_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ticket the SDK refused is never taken: it is dropped _KEPT tickets later."""
    monkeypatch.setattr(wire, "_KEPT", 3)
    stash = Stash()
    tickets = [stash.put({"n": n}, None, None) for n in range(1, 8)]
    assert tickets == [1, 2, 3, 4, 5, 6, 7]
    assert sorted(stash.items) == [5, 6, 7]
    assert stash.take({TICKET: 4}).arguments == {TICKET: 4}  # dropped
    assert stash.take({TICKET: 5}).arguments == {"n": 5}


def test_what_is_not_a_ticket_is_taken_as_it_is() -> None:
    stash = Stash()
    ticket = stash.put({"event": "go"}, None, None)
    for given in ({TICKET: ticket, "event": "x"}, {TICKET: str(ticket)}, {"other": ticket}):
        taken = stash.take(given)
        assert (taken.arguments, taken.pairs, taken.inside) == (given, None, None)
    assert stash.take(["not", "an", "object"]).arguments is None
    assert stash.take({TICKET: ticket}).arguments == {"event": "go"}  # still there


def test_a_fresh_caller_has_nothing_to_record_and_watches_only_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real Caller, on this test's own user store: before any call, no client is known and
    no event was fired, so a give-up records nothing and says nothing; the watch is built
    from the App's user store only when the server was given one."""
    caller = Caller(None)
    assert (caller.watch, caller.client, caller.fired) == (None, None, None)
    assert caller.gave_up() is False
    assert capsys.readouterr().err == ""
    built: list[Any] = []

    def watch(user: Any) -> Any:
        built.append(user)
        return lambda client, session: None

    watched = Caller(None, watch)
    assert built == [watched.app.user] and watched.watch is not None


class _Result:
    def __init__(self, ok: bool, session: Any, text: str) -> None:
        self.ok, self.session, self._text = ok, session, text

    def text(self) -> str:
        return self._text


class _Session:
    key = "k9"


class _App:
    """The App's part a Caller uses: records each fire's and view's arguments, answers with
    `result` or raises `error`; mark_late records and answers `late` (or raises it)."""

    def __init__(
        self, result: _Result | None = None, error: Exception | None = None, late: Any = False
    ) -> None:
        self.result, self.error, self.late = result, error, late
        self.calls: list[tuple[Any, ...]] = []
        self.marked: list[tuple[str, str]] = []

    def fire(self, *args: Any, **kwargs: Any) -> _Result:
        self.calls.append((*args, kwargs))
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def view(self, session: Any) -> _Result:
        self.calls.append(("view", session))
        assert self.result is not None
        return self.result

    def mark_late(self, key: str, event: str) -> bool:
        self.marked.append((key, event))
        if isinstance(self.late, Exception):
            raise self.late
        return bool(self.late)


def _caller(app: _App) -> Caller:
    """A Caller over `app`, without App(): no store is opened."""
    caller = Caller.__new__(Caller)
    caller.app = app  # type: ignore[assignment]
    caller.watch, caller.client, caller.fired = None, None, None
    return caller


def test_a_call_given_up_on_is_recorded_once(capsys: pytest.CaptureFixture[str]) -> None:
    app = _App(late=True)
    caller = _caller(app)
    assert caller.gave_up() is False  # nothing was fired: nothing to record
    caller.fired = ("k1", "go")
    assert caller.gave_up() is True
    assert app.marked == [("k1", "go")]
    assert caller.gave_up() is False and app.marked == [("k1", "go")]  # once
    assert capsys.readouterr().err == ""


def test_a_store_that_fails_then_is_said_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    app = _App(late=OSError("disk I/O error"))
    caller = _caller(app)
    caller.fired = ("k1", "go")
    assert caller.gave_up() is False
    assert capsys.readouterr().err == (
        "smllm mcp: can't record the call the client gave up on: disk I/O error\n"
    )
    assert caller.fired is None


def test_a_call_fires_as_the_agent_through_mcp() -> None:
    app = _App(_Result(True, _Session(), "moved"))
    caller = _caller(app)
    assert caller.call("smllm", {"session": "k9", "event": "go", "params": {"a": 1}}) == (
        "moved",
        False,
    )
    assert app.calls == [("k9", "go", (("a", 1),), {"source": "agent", "harness": "mcp"})]
    assert caller.fired == ("k9", "go")


def test_a_refused_call_leaves_nothing_to_record_as_given_up() -> None:
    app = _App(_Result(False, _Session(), "error: no"))
    caller = _caller(app)
    caller.fired = ("k1", "old")  # the call before's
    assert caller.call("smllm", {"session": "k9", "event": "go"}) == ("error: no", True)
    assert caller.fired is None
    assert caller.gave_up() is False


def test_the_watch_line_leads_the_reply() -> None:
    """The line a reply carries when the client's hooks don't run (harness/seen.py): the
    watch is asked with the client's name and the reply's session."""
    session = _Session()
    app = _App(_Result(True, session, "<smllm>…"))
    caller = _caller(app)
    caller.client = "opencode"
    asked: list[tuple[Any, Any]] = []

    def watch(client: Any, s: Any) -> str | None:
        asked.append((client, s))
        return "note: hooks are off" if len(asked) == 1 else None

    caller.watch = watch
    assert caller.call("smllm", {"event": "go"}) == ("note: hooks are off\n<smllm>…", False)
    assert caller.call("smllm", {}) == ("<smllm>…", False)  # no line: the text alone
    assert asked == [("opencode", session), ("opencode", session)]


def test_an_internal_error_is_an_error_result() -> None:
    caller = _caller(_App(error=RuntimeError("boom")))
    assert caller.call("smllm", {"event": "go"}) == (
        "error: internal error: RuntimeError: boom",
        True,
    )


def _err(id: Any, code: int, message: str) -> tuple[str, Any]:
    return "reply", {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}


#: (line, what the reader does with it): the answers it writes itself are exact
SORTED: list[tuple[bytes, tuple[str, Any]]] = [
    (b"{not json", _err(None, -32700, "Parse error")),
    (b"\xff\xfe", _err(None, -32700, "Parse error")),
    (b"[1, 2]", _err(None, -32600, "Invalid Request")),
    (b'{"jsonrpc":"1.0","id":3,"method":"ping"}', _err(3, -32600, "Invalid Request")),
    (b'{"jsonrpc":"2.0","id":[3],"method":"ping"}', _err(None, -32600, "Invalid Request")),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', _err(None, -32600, "Invalid Request")),
    (b'{"jsonrpc":"2.0","id":4,"method":7}', _err(4, -32600, "Invalid Request")),
    (b'{"jsonrpc":"2.0","id":4,"method":"ping","params":[]}', _err(4, -32600, "Invalid Request")),
    (b'{"jsonrpc":"2.0","id":5,"method":"ping"}', ("reply", {"jsonrpc": "2.0", "id": 5, "result": {}})),  # noqa: E501
    (b'{"jsonrpc":"2.0","id":"x","method":"no/such"}', _err("x", -32601, "Method not found: no/such")),  # noqa: E501
    (b'{"jsonrpc":"2.0","id":6,"result":{}}', ("drop", None)),
    (b'{"jsonrpc":"2.0","method":"notifications/other"}', ("drop", None)),
    (b'{"jsonrpc":"1.0","method":"notifications/initialized"}', ("drop", None)),
    (b'{"method":"notifications/initialized"}', ("drop", None)),
    (b'{"jsonrpc":"2.0","method":5}', ("drop", None)),
    (b'{"jsonrpc":"1.0","result":{}}', _err(None, -32600, "Invalid Request")),
    (
        b'{"jsonrpc":"2.0","method":"notifications/cancelled"}',
        ("forward", {"jsonrpc": "2.0", "method": "notifications/cancelled"}),
    ),
    (
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        ("forward", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ),
    (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":1}}',
        _err(7, -32602, "Invalid params: params.name must be the tool's name, a string"),
    ),
]  # fmt: skip


def test_what_the_reader_answers_itself(capsys: pytest.CaptureFixture[str]) -> None:
    for line, expected in SORTED:
        assert wire.sort_line(line, Stash()) == expected, line
    assert capsys.readouterr().err == (
        "smllm mcp: refused tools/call 7: params.name must be the tool's name, a string\n"
    )


def test_the_reader_keeps_the_clients_name_and_its_calls() -> None:
    stash = Stash()
    hello = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"codex"}}}'
    )
    kind, answer = wire.sort_line(hello, stash)
    assert (kind, answer["id"], stash.client) == ("reply", 1, "codex")
    call = b'{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"smllm"}}'
    kind, forwarded = wire.sort_line(call, stash)
    assert kind == "forward" and stash.running == {"c1"}
    assert forwarded["params"] == {"name": "smllm"}  # no arguments: nothing stashed
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}'
    assert wire.sort_line(cancel, stash)[0] == "forward" and stash.cancelled == {"c1"}
    other = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c2"}}'
    assert wire.sort_line(other, stash)[0] == "forward" and stash.cancelled == {"c1"}


def test_the_wire_writes_one_compact_line_a_message() -> None:
    import os

    read, write = os.pipe()
    try:
        out = wire.Wire(write)
        out.send({"id": 1, "result": {"text": "é · ✓", "n": [1, 2]}})
        out.send({"id": 2, "error": {"message": "\ud800 echoed"}})  # no UTF-8 form: escaped
        data = os.read(read, 4096)
    finally:
        os.close(read)
    assert data == (
        '{"id":1,"result":{"text":"é · ✓","n":[1,2]}}\n'.encode()
        + b'{"id":2,"error":{"message":"\\ud800 echoed"}}\n'
    )
    assert out.broken is False
    out.send({"id": 3})  # the reader is gone: the wire says so, once, and stays quiet
    assert out.broken is True
    os.close(write)
    out.send({"id": 4})  # a closed descriptor: no error either
    assert out.broken is True


def test_the_sdks_log_is_one_short_line_a_record(capsys: pytest.CaptureFixture[str]) -> None:
    """What the SDK logs goes to stderr as one line of at most 500 characters, its level in
    lower case; INFO and below not at all."""
    import logging

    from smllm.mcp.server import _quiet_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        _quiet_logging()
        logging.getLogger("mcp.server").warning("first line\nsecond %s", "x" * 600)
        logging.getLogger("mcp.server").error("failed")
        logging.getLogger("mcp.server").info("not shown")
    finally:
        root.handlers[:], root.level = handlers, level
    text = "first line second " + "x" * 482
    assert capsys.readouterr().err == (f"smllm mcp: warning: {text}\nsmllm mcp: error: failed\n")


def test_the_reader_thread_answers_what_it_cant_sort(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line whose sorting fails in a way nothing foresaw is answered Invalid Request (no
    traceback), and the reader goes on; at the end of input it says so to the server, and
    standard input stays open (a guard's command must never get another file as its fd 0)."""
    import os

    from smllm.mcp import server

    def sort(line: bytes, stash: Stash) -> tuple[str, Any]:
        if line == b"boom":
            raise KeyError("x")
        return wire.sort_line(line, stash)

    monkeypatch.setattr(server, "sort_line", sort)
    given_r, given_w = os.pipe()
    out_r, out_w = os.pipe()
    saved = os.dup(0)
    try:
        os.write(given_w, b'boom\n\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        os.close(given_w)
        os.dup2(given_r, 0)
        inbox, stash = wire.Inbox(), Stash()
        server._read(wire.Wire(out_w), inbox, stash)
        os.fstat(0)  # still open
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(given_r)
        os.close(out_w)
    with os.fdopen(out_r, "rb") as answers:
        assert answers.read() == (
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n'
            b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
        )
    assert capsys.readouterr().err == "smllm mcp: unreadable message: KeyError\n"
    assert stash.ended
