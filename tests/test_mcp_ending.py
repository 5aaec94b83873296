"""`smllm mcp` at the end of its input: the answers still owed are written, then exit 0, in
every order of end and answers (a client leaves by closing stdin, MCP's stdio shutdown)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from conftest import smllm
from helpers.mcp_client import ENTER, McpProcess


def test_end_of_input_answers_what_was_asked(project: Path, env: dict[str, str]) -> None:
    with McpProcess(project, env) as proc:
        proc.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        proc.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        call = {"name": "smllm", "arguments": ENTER}
        proc.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        assert proc.close() == 0
        assert sorted(m["id"] for m in proc.rest()) == [1, 2, 3]
        assert proc.stderr() == ""


@pytest.mark.parametrize("sniffio", ["installed", "missing"])
def test_end_of_input_after_a_call(
    project: Path, env: dict[str, str], tmp_path: Path, sniffio: str
) -> None:
    """Input that ends after the answers (the usual way a client leaves) ends the server, with
    and without sniffio: where it is installed, anyio finds its backend through it, which
    works only inside a task (a loop callback that started one kept a server running for
    ever on CI's Python, which has sniffio)."""
    if sniffio == "installed":
        assert importlib.util.find_spec("sniffio"), "install sniffio (the dev extra has it)"
    else:
        shim = tmp_path / "no-sniffio"
        shim.mkdir()
        (shim / "sniffio.py").write_text(
            "raise ModuleNotFoundError(\"No module named 'sniffio'\", name='sniffio')\n"
        )
        paths = [str(shim), env.get("PYTHONPATH", "")]
        env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    with McpProcess(project, env) as proc:
        proc.initialize()
        text, is_error = proc.tool(**ENTER)
        assert not is_error, text
        assert proc.close(timeout=20) == 0
        assert proc.rest() == []
        assert proc.stderr() == ""


def test_end_of_input_at_once(project: Path, env: dict[str, str]) -> None:
    ran = smllm(["mcp"], project, env, stdin="")
    assert ran == (0, "", "")


def test_end_of_input_with_calls_still_waiting(project: Path, env: dict[str, str]) -> None:
    """Input that ends while calls wait their turn: every one is answered before the exit
    (the server counts what it owes, not only whether it owes)."""
    with McpProcess(project, env) as proc:
        proc.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        for n in range(2, 8):
            params = {"stateMachine": "dev", "issueId": f"GH-{n}"}
            call = {"name": "smllm", "arguments": {"event": "enter", "params": params}}
            proc.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call})
        assert proc.close() == 0
        answers = proc.rest()
        assert sorted(m["id"] for m in answers) == [1, 2, 3, 4, 5, 6, 7]
        assert all(not m["result"]["isError"] for m in answers if m["id"] != 1)
        assert proc.stderr() == ""


def test_without_the_mcp_package_it_says_so(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """An install without the SDK (a broken environment): one line saying what is missing,
    exit 2, nothing on the protocol stream."""
    shim = tmp_path / "no-mcp" / "mcp"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n"
    )
    paths = [str(shim.parent), env.get("PYTHONPATH", "")]
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    ran = smllm(["mcp"], project, env, stdin="")
    assert ran == (2, "", "error: smllm mcp needs the mcp package: No module named 'mcp'\n")
