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
