"""`smllm mcp`, the stdio MCP server (cli-and-harnesses.md §4), spoken to as the real clients
speak (real-clients.md, shared/clientlab/samples/*/mcp.log): a real `python -m smllm mcp`
process, one JSON-RPC message a line. Any line on its stdout that isn't one JSON object fails
the test that reads it (helpers/mcp_client.py). Speed is bench/mcp_bench.py's business."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import bounded, smllm, write_machine
from helpers.golden import GOLDEN, SEED_KEY, parse
from helpers.mcp_client import ENTER, Fuzzer, McpProcess, fuzz_lines
from hypothesis import HealthCheck, given

import smllm as package

RULES = (
    "smllm guides your work with state machines. Each reply is one <smllm> block: its header "
    "names your session key and where you are, <instructions> says what to do in this state, "
    "and <events> lists the events you can fire. When the state's work is done, fire exactly "
    "one of those events; the reply brings the next instructions. Pass the session key from "
    "the latest header on every call, and leave it out only to start a session with enter. "
    "Before you end your turn to ask the user something or to wait for them, fire yield. Only "
    "the main agent calls smllm; never give the session key to a subagent."
)
SENTENCE = (
    "Call with { session } alone to see where you are, or with { session, event, params } "
    "to fire an event."
)
SCHEMA = json.loads("""
{"type":"object","properties":{
  "session":{"type":"string","description":"The session key from the latest <smllm> header, such as sm-nqvfvw. Leave it out only to start a session with the event enter."},
  "event":{"type":"string","description":"The event to fire. Leave it out to see where you are."},
  "params":{"type":"object","description":"The event's params by name. Strings, except where the events list says a param takes a JSON value."}}}
""")  # noqa: E501 - the spec's text, as written there
PASS_KEY = (
    "pass the session key from the latest <smllm> header, or fire enter without one to start "
    "a session"
)
CLAUDE_PROBE = {
    "jsonrpc": "2.0",
    "id": "server-discover-probe-1",
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.328"},
            "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}},
        }
    },
}

#: a machine whose event takes a JSON param, and whose guard writes to stdout, straight into
#: the server's fd 1 (as a command that reopens /proc/PID/fd/1 or inherits it would), and
#: keeps the param it got
LISTS = """\
id: lists
description: Takes a list of files.
initial: START
meta:
  smllm: 1
  events:
    go:
      description: Go.
      params:
        type: object
        properties:
          files: { description: "Files.", type: array, items: { type: string }, minItems: 1 }
        required: [files]
states:
  START:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Start." } }
    on:
      go:
        - target: DONE
          guard:
            type: command
            params:
              run: "echo GUARD-STDOUT; echo GUARD-FD1 > /proc/$PPID/fd/1; printf '%s' \\"$SMLLM_PARAM_FILES\\" > files.json"
        - { target: START, reenter: true }
  DONE:
    type: final
    entry: { type: prompt, params: { text: "Done." } }
"""  # noqa: E501


SLOW = """\
id: slow
description: Waits.
initial: START
meta:
  smllm: 1
  events:
    wait: { description: Wait. }
states:
  START:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Start." } }
    on:
      wait:
        - { target: DONE, guard: { type: command, params: { run: "sleep 3" } } }
        - { target: START, reenter: true }
  DONE:
    type: final
    entry: { type: prompt, params: { text: "Done." } }
"""


@pytest.fixture
def server(project: Path, env: dict[str, str]) -> Any:
    with McpProcess(project, env) as proc:
        proc.initialize()
        yield proc
        assert proc.close() == 0
        assert "Traceback" not in proc.stderr()


def key_of(text: str) -> str:
    """The session key in a block's header (`session sm-… · …`)."""
    header = text.split("\n")[1]
    assert header.startswith("session sm-"), text
    return header.split()[1]


# -- the handshakes of the real clients --------------------------------------------------------


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "smllm", "version": package.__version__},
        "instructions": RULES,
    }


def test_claude_and_copilot_handshake(project: Path, env: dict[str, str]) -> None:
    with McpProcess(project, env) as proc:
        proc.send(CLAUDE_PROBE)
        probe = proc.read()
        assert probe is not None and probe["id"] == "server-discover-probe-1"
        assert probe["error"]["code"] == -32601
        assert "result" not in probe
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}}},
            "clientInfo": {"name": "claude-code", "version": "2.1.328"},
        }
        answer = proc.request("initialize", params, id=0)
        assert answer == {"jsonrpc": "2.0", "id": 0, "result": initialize_result("2025-11-25")}
        proc.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = proc.request("tools/list", id=1)  # answered next: the notification got none
        assert [t["name"] for t in listed["result"]["tools"]] == ["smllm"]
        meta = {"claudecode/toolUseId": "toolu_1", "progressToken": 2}
        called = proc.request("tools/call", {"name": "smllm", "arguments": ENTER, "_meta": meta})
        assert called["result"]["isError"] is False
        assert proc.close() == 0
        assert proc.rest() == []
        assert proc.stderr() == ""


def test_codex_handshake(project: Path, env: dict[str, str]) -> None:
    with McpProcess(project, env) as proc:
        answer = proc.initialize("2025-06-18")
        assert answer["result"] == initialize_result("2025-06-18")
        for method in ("resources/list", "resources/templates/list", "prompts/list"):
            error = proc.request(method, {"_meta": {"progressToken": 0}})["error"]
            assert error["code"] == -32601
        listed = proc.request("tools/list", {"_meta": {"progressToken": 0}})
        assert listed["result"]["tools"][0]["name"] == "smllm"
        assert proc.close() == 0


VERSIONS = [
    ("2024-11-05", "2024-11-05"),
    ("2025-03-26", "2025-03-26"),
    ("2025-06-18", "2025-06-18"),
    ("2025-11-25", "2025-11-25"),
    ("2026-07-28", "2025-11-25"),  # Claude drops a server answering this
    ("2023-01-01", "2025-11-25"),
    ("", "2025-11-25"),
    (5, "2025-11-25"),
    (None, "2025-11-25"),
]


def test_version_negotiation(project: Path, env: dict[str, str]) -> None:
    with McpProcess(project, env) as proc:
        for asked, answered in VERSIONS:
            params = {} if asked is None else {"protocolVersion": asked}
            answer = proc.request("initialize", params)
            assert answer["result"] == initialize_result(answered), asked
        answer = proc.request("initialize")  # no params at all
        assert answer["result"] == initialize_result("2025-11-25")


def test_tools_list_is_exactly_the_spec(server: McpProcess) -> None:
    listed = server.request("tools/list")
    assert listed == {
        "jsonrpc": "2.0",
        "id": listed["id"],
        "result": {
            "tools": [
                {"name": "smllm", "description": f"{RULES}\n\n{SENTENCE}", "inputSchema": SCHEMA}
            ]
        },
    }


def test_ping_and_requests_before_initialize(project: Path, env: dict[str, str]) -> None:
    with McpProcess(project, env) as proc:
        assert proc.request("ping")["result"] == {}
        assert proc.request("tools/list")["result"]["tools"][0]["name"] == "smllm"
        proc.initialize()
        assert proc.request("ping")["result"] == {}


# -- the example session over MCP ----------------------------------------------------------------


def test_golden_transcript_over_mcp(project: Path, env: dict[str, str]) -> None:
    made = smllm(["session", "new", "--json"], project, env)
    key = json.loads(made.out)["session"]
    steps = parse(GOLDEN.read_text())
    with McpProcess(project, env) as proc:
        proc.initialize()
        for command, expected, code in steps:
            words = shlex.split(command.replace(SEED_KEY, key))
            if words[0] != "smllm":
                assert subprocess.run(command, shell=True, cwd=project, env=env).returncode == code
                continue
            if words[1:3] == ["session", "show"]:
                arguments: dict[str, Any] = {"session": words[3]}
            else:
                assert words[1:3] == ["fire", "--session"], command
                params = dict(w.split("=", 1) for w in words[5:] if w != "--param")
                arguments = {"session": words[3], "event": words[4], "params": params}
            text, is_error = proc.tool(**arguments)
            assert text + "\n" == expected.replace(SEED_KEY, key), command
            assert is_error is (code == 1), command
        assert proc.close() == 0
        assert proc.stderr() == ""


def test_keyless_enter_makes_an_mcp_session(
    server: McpProcess, project: Path, env: dict[str, str]
) -> None:
    text, is_error = server.tool(**ENTER)
    assert not is_error
    key = key_of(text)
    assert text == (
        "<smllm>\n"
        f"session {key} · dev › PLAN · issue GH-3\n"
        "Arrived by: enter (new issue)\n"
        'Params: stateMachine = "dev", issueId = "GH-3"\n'
        "<instructions>\n"
        "Write a plan for the issue in PLAN.md, then fire planned.\n"
        "</instructions>\n"
        "</smllm>"
    )
    listed = json.loads(smllm(["session", "list", "--json"], project, env).out)
    assert [(s["key"], s["harness"]) for s in listed["sessions"]] == [(key, "mcp")]
    view, is_error = server.tool(session=key)
    assert not is_error and view == smllm(["session", "show", key], project, env).out[:-1]


def test_refusal_is_an_error_result(server: McpProcess) -> None:
    text, is_error = server.tool(event="enter", params={"stateMachine": "dev", "issueId": "bad"})
    assert is_error
    assert text.startswith("<smllm>\nno session · idle\n")
    assert 'error: enter param issueId must match ^GH-[0-9]+$ (got "bad")' in text


# -- call errors (cli-and-harnesses.md §3, §4) -----------------------------------------------------


CALL_ERRORS = [
        ({}, f"error: to see where you are, {PASS_KEY}"),
        (None, f"error: to see where you are, {PASS_KEY}"),
        ({"session": None, "event": ""}, f"error: to see where you are, {PASS_KEY}"),
        ({"session": "", "params": None}, f"error: to see where you are, {PASS_KEY}"),
        ({"event": "yield"}, f"error: yield needs a session; {PASS_KEY}"),
        ({"session": "sm-zzzzzz"}, f"error: no session sm-zzzzzz; {PASS_KEY}"),
        ({"session": "sm-zzzzzz", "event": "yield"}, f"error: no session sm-zzzzzz; {PASS_KEY}"),
        ({"session": "sm-\ud800é"}, f"error: no session sm-\ud800é; {PASS_KEY}"),
    ({"session": 5}, "error: session must be a string"),
        ({"session": ["sm-x"], "event": "enter"}, "error: session must be a string"),
        ({"event": {"e": 1}}, "error: event must be a string"),
        ({"event": True}, "error: event must be a string"),
        ({"event": "enter", "params": "stateMachine=dev"}, "error: params must be an object"),
        ({"event": "enter", "params": [["stateMachine", "dev"]]},
         "error: params must be an object"),
        ({"event": "enter", "params": 0}, "error: params must be an object"),
]  # fmt: skip


def test_call_errors(server: McpProcess) -> None:
    for arguments, expected in CALL_ERRORS:
        message: dict[str, Any] = {"name": "smllm"}
        if arguments is not None:
            message["arguments"] = arguments
        answer = server.request("tools/call", message)
        result = {"content": [{"type": "text", "text": expected}], "isError": True}
        assert answer["result"] == result, arguments


def test_another_tool_is_a_protocol_error(server: McpProcess) -> None:
    answer = server.call({"event": "enter"}, name="echo")
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == "no tool echo"
    assert "result" not in answer


def test_null_and_empty_count_as_absent(server: McpProcess) -> None:
    text, is_error = server.tool(session=None, event="enter", params=ENTER["params"])
    assert not is_error and "· dev › PLAN · issue GH-3" in text
    key = key_of(text)
    again, is_error = server.tool(session=key, event="", params={"ignored": 1})  # a view
    assert not is_error and "<events>" in again
    text, is_error = server.tool(session=key, event="pause", params=None)
    assert not is_error, text


def test_other_argument_keys_are_ignored(server: McpProcess) -> None:
    text, is_error = server.tool(**ENTER, note="hello", sessionKey=5, _meta={})
    assert not is_error and "issue GH-3" in text


def test_a_param_given_twice(server: McpProcess) -> None:
    server.send_raw(
        '{"jsonrpc":"2.0","id":"twice","method":"tools/call","params":{"name":"smllm",'
        '"arguments":{"event":"enter","params":{"stateMachine":"dev","issueId":"GH-3",'
        '"stateMachine":"dev"}}}}'
    )
    answer = server.read()
    assert answer is not None and answer["id"] == "twice"
    assert answer["result"]["isError"] is True
    assert (
        "error: enter got param stateMachine more than once"
        in answer["result"]["content"][0]["text"]
    )
    # the ticket under which the reader keeps a call's arguments from the SDK can't be forged
    text, is_error = server.tool(**ENTER, **{"smllm-ticket": 1})
    assert not is_error, text
    text, is_error = server.tool(**{"smllm-ticket": 2})
    assert (text, is_error) == (f"error: to see where you are, {PASS_KEY}", True)


def test_params_nested_deep(server: McpProcess) -> None:
    """Refused by the engine in its words, at any depth the JSON parser reads (the SDK's models
    alone would refuse a few hundred levels with a bare -32602)."""
    for depth in (65, 300, 900):
        nested = "[" * depth + '"GH-1"' + "]" * depth
        server.send_raw(
            '{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"smllm",'
            '"arguments":{"event":"enter","params":{"stateMachine":"dev","issueId":'
            + nested
            + "}}}}"
        )
        answer = server.read()
        assert answer is not None and answer["result"]["isError"] is True, answer
        text = answer["result"]["content"][0]["text"]
        assert "error: enter params nest more than 64 levels deep" in text, depth


def test_json_params_and_guard_output(project: Path, env: dict[str, str]) -> None:
    write_machine(project, "lists", LISTS)
    with McpProcess(project, env) as proc:
        proc.initialize()
        text, is_error = proc.tool(event="enter", params={"stateMachine": "lists"})
        assert not is_error, text
        key = key_of(text)
        text, is_error = proc.tool(session=key, event="go", params={"files": 5})
        assert is_error and "go param files doesn't match its schema" in text
        text, is_error = proc.tool(session=key, event="go", params={"files": ["a.py", "b é.py"]})
        assert not is_error, text
        assert "lists › DONE" in text
        assert json.loads((project / "files.json").read_text()) == ["a.py", "b é.py"]
        assert proc.request("ping")["result"] == {}  # stdout held nothing but answers
        assert proc.close() == 0
        assert proc.rest() == []
        assert "GUARD-STDOUT" not in proc.stderr()  # kept by the guard's own pipe
        assert "GUARD-FD1" in proc.stderr()  # fd 1 of the server is its stderr


def test_list_and_ping_while_a_call_runs(project: Path, env: dict[str, str]) -> None:
    """tools/list, ping and initialize never wait for a call (nor for the SDK's import)."""
    write_machine(project, "slow", SLOW)
    with McpProcess(project, env) as proc:
        proc.initialize()
        text, is_error = proc.tool(event="enter", params={"stateMachine": "slow"})
        assert not is_error, text
        arguments = {"session": key_of(text), "event": "wait"}
        proc.send(
            {
                "jsonrpc": "2.0",
                "id": "slow",
                "method": "tools/call",
                "params": {"name": "smllm", "arguments": arguments},
            }
        )
        proc.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        proc.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        proc.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {}})
        answers = [proc.read() for _ in range(4)]
        assert [a["id"] for a in answers if a is not None] == ["list", "ping", "init", "slow"]
        assert "slow › DONE" in answers[3]["result"]["content"][0]["text"]  # type: ignore[index]
        assert proc.close() == 0


def test_an_edited_machine_is_reloaded(server: McpProcess, project: Path) -> None:
    text, _ = server.tool(**ENTER)
    key = key_of(text)
    machine = project / ".smllm" / "dev.smllm.yaml"
    for prompt in ("Plan it in PLAN.md, please.", "Second edit, same size!!"):
        machine.write_text(
            machine.read_text().replace(
                "Write a plan for the issue in PLAN.md, then fire planned.", prompt
            )
            if "Write a plan" in machine.read_text()
            else machine.read_text().replace("Plan it in PLAN.md, please.", prompt)
        )
        view, is_error = server.tool(session=key)
        assert not is_error and f"<instructions>\n{prompt}\n</instructions>" in view


def test_a_broken_store_is_an_error_result(project: Path, env: dict[str, str]) -> None:
    state = project.parent / "state-is-a-file"
    state.write_text("")
    with McpProcess(project, {**env, "XDG_STATE_HOME": str(state)}) as proc:
        proc.initialize()
        text, is_error = proc.tool(**ENTER)
        assert is_error and text.startswith("error: can't create ")
        assert proc.request("ping")["result"] == {}
        assert proc.close() == 0


def test_calls_run_one_at_a_time(server: McpProcess) -> None:
    text, _ = server.tool(**ENTER)
    key = key_of(text)
    calls = [{"session": key, "event": "yield"}, {"session": key}] * 5
    for n, arguments in enumerate(calls):
        server.send(
            {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": "smllm", "arguments": arguments},
            }
        )
    answers = {}
    for _ in calls:
        answer = server.read()
        assert answer is not None
        answers[answer["id"]] = answer["result"]
    assert sorted(answers) == list(range(len(calls)))
    for result in answers.values():
        assert result["isError"] is False, result  # none found the session busy


def test_config_option(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = str(project / ".smllm" / "config.toml")
    with McpProcess(elsewhere, env, ["--config", config]) as proc:
        proc.initialize()
        text, is_error = proc.tool(**ENTER)
        assert not is_error and "dev › PLAN" in text
        assert proc.close() == 0
    missing = smllm(["mcp", "--config", str(tmp_path / "nope.toml")], elsewhere, env, stdin="")
    assert (missing.code, missing.out) == (2, "")
    assert missing.err.startswith("error: config file ")


# -- the stream itself -----------------------------------------------------------------------------


BAD_LINES = [
    (b"garbage", -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"', -32700, None),
    (b"\xff\xfe{}", -32700, None),
    (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":NaN}}', -32700, None),
    (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":1e999}}', -32700, None),
    (b"[" * 100_000, -32700, None),
    (b"[]", -32600, None),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, None),
    (b"5", -32600, None),
    (b'{"jsonrpc":"1.0","id":8,"method":"ping"}', -32600, 8),
    (b'{"id":8,"method":"ping"}', -32600, 8),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":9,"method":5}', -32600, 9),
    (b'{"jsonrpc":"2.0","id":9,"method":"ping","params":[]}', -32600, 9),
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":{}}}', -32602, 9),
    (
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"smllm","arguments":5}}',
        -32602,
        9,
    ),
    (b'{"jsonrpc":"2.0","id":"x","method":"no/such/method"}', -32601, "x"),
]


def test_bad_lines_get_an_error_and_the_server_goes_on(server: McpProcess) -> None:
    for line, code, id in BAD_LINES:
        server.send_raw(line)
        answer = server.read()
        assert answer is not None, line
        assert answer["jsonrpc"] == "2.0"
        assert answer["id"] == id and answer["error"]["code"] == code, (line, answer)
        assert server.request("ping")["result"] == {}


def test_what_gets_no_answer(server: McpProcess) -> None:
    for message in [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "method": "server/discover"},  # a notification, however odd
        {"jsonrpc": "2.0", "id": 5, "result": {}},  # a response: smllm sends no requests
        {"jsonrpc": "2.0", "id": 6, "error": {"code": 1, "message": "x"}},
    ]:
        server.send(message)
    server.send_raw(b"")
    server.send_raw(b"   \r")
    answer = server.request("ping", id="after")
    assert answer == {"jsonrpc": "2.0", "id": "after", "result": {}}


def test_fuzz_one_server(project: Path, env: dict[str, str]) -> None:
    """Random lines at one running server: every well-formed request gets exactly one answer,
    nothing but JSON on stdout, no traceback on stderr, and the server lives on."""
    with McpProcess(project, env) as proc:
        proc.initialize()
        fuzzer = Fuzzer(proc)

        @bounded(
            max_examples=300,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(fuzz_lines())
        def one(lines: list[bytes]) -> None:
            examples.append(len(lines))
            assert fuzzer.run(lines, timeout=5) == []

        examples: list[int] = []

        started = time.monotonic()
        one()
        assert len(examples) >= 200  # the run really ran
        assert proc.request("ping")["result"] == {}
        assert proc.close() == 0
        assert "Traceback" not in proc.stderr()
        assert time.monotonic() - started < 600
