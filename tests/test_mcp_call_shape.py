"""tools/call with params of the wrong shape (issue 20 §8): a JSON-RPC error -32602 whose
message is one sentence, and one line on stderr, never the SDK's pydantic dump; the server goes
on answering."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.mcp_client import McpProcess

CASES = [
    (
        {"name": "smllm", "arguments": [1, 2]},
        "params.arguments must be an object (session, event, params)",
    ),
    (
        {"name": "smllm", "arguments": "x"},
        "params.arguments must be an object (session, event, params)",
    ),
    ({"name": 5, "arguments": {}}, "params.name must be the tool's name, a string"),
    ({"arguments": {}}, "params.name must be the tool's name, a string"),
    ({"name": "smllm", "_meta": [1]}, "params._meta must be an object"),
    (None, "tools/call needs params: an object with the tool's name and arguments"),
]


@pytest.mark.parametrize(("params", "problem"), CASES)
def test_a_wrong_shape_is_one_sentence(
    params: object, problem: str, project: Path, env: dict[str, str]
) -> None:
    with McpProcess(project, env) as server:
        server.initialize()
        answer = server.request("tools/call", params, id=41)
        assert answer == {
            "jsonrpc": "2.0",
            "id": 41,
            "error": {"code": -32602, "message": f"Invalid params: {problem}"},
        }
        text, is_error = server.tool()  # the server goes on
        assert is_error and text.startswith("error: to see where you are")
        assert server.close() == 0
        assert server.stderr() == f"smllm mcp: refused tools/call 41: {problem}\n"


def test_params_not_an_object_beside_a_repeated_key(project: Path, env: dict[str, str]) -> None:
    """A raw line whose arguments repeat a key and whose params are a list: the tool's own
    refusal (an error result), as for a list alone; a repeated key elsewhere changes nothing."""
    with McpProcess(project, env) as server:
        server.initialize()
        server.send_raw(
            '{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"smllm",'
            '"arguments":{"event":"enter","event":"enter","params":[{"a":1,"a":2}]}}}'
        )
        answer = server.read()
        assert answer == {
            "jsonrpc": "2.0",
            "id": 42,
            "result": {
                "content": [{"type": "text", "text": "error: params must be an object"}],
                "isError": True,
            },
        }
        assert server.close() == 0
        assert server.stderr() == ""


def test_a_bad_notification_gets_no_answer(project: Path, env: dict[str, str]) -> None:
    """JSON-RPC answers no notification, not even a malformed one: the next answer on the
    stream is the ping's."""
    with McpProcess(project, env) as server:
        server.initialize()
        for message in [
            {"jsonrpc": "1.0", "method": "notifications/initialized"},
            {"method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": 5},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "bad"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": []}},
            {"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1]},
            {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"_meta": 3}},
        ]:
            server.send(message)
        assert server.request("ping", id="after") == {"jsonrpc": "2.0", "id": "after", "result": {}}
        assert server.close() == 0
        assert server.rest() == []
