"""Long tool calls over MCP (issue 20 §1): while a guard runs, the server sends
`notifications/progress` to a client that asked for them (a progressToken), and none to one
that didn't; when the client stops waiting (a `notifications/cancelled`, or its end of the
pipe closed), what the call did stands, and the session's next reply, over MCP or the CLI,
starts with one line saying so; the reply after that doesn't."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import smllm, write_machine
from helpers.mcp_client import McpProcess
from helpers.slow_machine import slow_machine

SLOW = slow_machine(2.5)

NOTE = (
    "note: your last call (checked) was carried out after the client stopped waiting for its "
    "reply; what it did stands"
)


def slow_project(project: Path, env: dict[str, str]) -> str:
    write_machine(project, "slow", SLOW)
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=slow", "--param", "taskId=T-1", "--json"],
        project,
        env,
    )
    assert ran.code == 0, ran.out
    key: str = json.loads(ran.out)["session"]
    return key


def checked(key: str, id: int, token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "smllm", "arguments": {"session": key, "event": "checked"}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def state_of(project: Path, env: dict[str, str]) -> str:
    shown = json.loads(smllm(["instance", "show", "T-1", "--json"], project, env).out)
    state: str = shown["instance"]["state"]
    return state


def test_progress_while_a_guard_runs(project: Path, env: dict[str, str]) -> None:
    key = slow_project(project, env)
    with McpProcess(project, {**env, "SMLLM_PROGRESS_SECONDS": "0.5"}) as server:
        server.initialize()
        server.send(checked(key, 7, token="tok-1"))
        seen = []
        while (message := server.read()) is not None and "id" not in message:
            seen.append(message)
        assert message is not None and message["id"] == 7
        assert not message["result"]["isError"]
        assert len(seen) >= 3, seen
        for count, note in enumerate(seen, 1):
            assert note == {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {
                    "progressToken": "tok-1",
                    "progress": count,  # increasing, as the spec wants
                    "message": f"still running ({count * 0.5:g} s)",
                },
            }
        assert server.close() == 0
        assert server.rest() == []  # none after the answer


def test_no_progress_without_a_token(project: Path, env: dict[str, str]) -> None:
    key = slow_project(project, env)
    with McpProcess(project, {**env, "SMLLM_PROGRESS_SECONDS": "0.5"}) as server:
        server.initialize()
        server.send(checked(key, 8))
        answer = server.read()
        assert answer is not None and answer["id"] == 8, answer
        assert server.close() == 0


def test_a_cancelled_call_stands_and_the_next_reply_says_so(
    project: Path, env: dict[str, str]
) -> None:
    key = slow_project(project, env)
    with McpProcess(project, env) as server:
        server.initialize()
        server.send(checked(key, 9, token=1))
        time.sleep(0.5)  # the guard runs
        server.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 9, "reason": "Request timed out"},
            }
        )
        answer = server.read()
        assert answer is not None and answer["id"] == 9
        assert state_of(project, env) == "DONE"  # the commit stands
        text, is_error = server.tool(session=key)
        assert not is_error
        first, rest = text.split("\n", 1)
        assert first == NOTE
        assert rest.startswith("<smllm>\n")
        again, _ = server.tool(session=key)
        assert again == rest  # once only
        # the id of the cancelled call, used again once it was answered: a call like any other
        enter = {"stateMachine": "slow", "taskId": "T-2"}
        arguments = {"session": key, "event": "enter", "params": enter}
        call = {"name": "smllm", "arguments": arguments}
        server.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call})
        answer = server.read()
        assert answer is not None and answer["id"] == 9 and not answer["result"]["isError"]
        after, _ = server.tool(session=key)
        assert after.startswith("<smllm>\n"), after
        assert server.close() == 0


def test_a_closed_pipe_mid_call_is_told_on_the_cli(project: Path, env: dict[str, str]) -> None:
    key = slow_project(project, env)
    with McpProcess(project, env) as server:
        server.initialize()
        server.send(checked(key, 10))
        time.sleep(0.5)
        assert server.close() == 0  # the client went away while the guard ran
    assert state_of(project, env) == "DONE"
    shown = smllm(["fire", "--session", key, "enter", "--param", "stateMachine=slow"], project, env)
    lines = shown.out.split("\n")
    assert lines[0] == NOTE and lines[1] == "<smllm>"
    again = smllm(["session", "show", key], project, env)
    assert again.code == 0 and again.out.startswith("<smllm>\n")


def test_a_refused_call_is_not_marked(project: Path, env: dict[str, str]) -> None:
    key = slow_project(project, env)
    with McpProcess(project, env) as server:
        server.initialize()
        request = checked(key, 11)
        request["params"]["arguments"]["event"] = "nope"
        server.send(request)
        server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}}
        )
        answer = server.read()
        assert answer is not None and answer["result"]["isError"]
        text, _ = server.tool(session=key)
        assert text.startswith("<smllm>\n")
        assert server.close() == 0


def test_a_cancel_after_the_answer_is_ignored(project: Path, env: dict[str, str]) -> None:
    """OpenCode cancels every call it already has the answer to: nothing is noted for it."""
    key = slow_project(project, env)
    with McpProcess(project, env) as server:
        server.initialize()
        server.send(checked(key, 12))
        answer = server.read()
        assert answer is not None and answer["id"] == 12
        server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12}}
        )
        text, _ = server.tool(session=key)
        assert text.startswith("<smllm>\n")
        assert server.close() == 0


def test_a_late_cancel_doesnt_stick_to_the_id(project: Path, env: dict[str, str]) -> None:
    """A cancel after the answer is forgotten with the call: a later call that reuses the id
    (JSON-RPC allows it once the first was answered) is not taken for a cancelled one."""
    key = slow_project(project, env)
    with McpProcess(project, env) as server:
        server.initialize()
        view = {"name": "smllm", "arguments": {"session": key}}
        server.send({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": view})
        answer = server.read()
        assert answer is not None and answer["id"] == 12
        server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12}}
        )
        server.send(checked(key, 12))
        answer = server.read()
        assert answer is not None and answer["id"] == 12
        assert not answer["result"]["isError"]
        text, _ = server.tool(session=key)
        assert text.startswith("<smllm>\n"), text
        assert server.close() == 0
