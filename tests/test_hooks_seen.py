"""Hooks that don't run are seen (issue 20 §3): an MCP reply to a client whose hooks are
installed in the project, for a session no session-start hook of that client bound (a keyless
enter over MCP), starts with one line saying so and how to fix it; once a hook of that client
runs in the project the line goes; no line for a client without smllm's hooks there, nor for
an unknown client. `harness status` says when each hook last acted, or `never`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import smllm
from helpers.mcp_client import McpProcess

from smllm.harness.seen import not_running_note

CLIENTS = {
    "claude": "claude-code",
    "codex": "codex-mcp-client",
    "copilot": "copilot-cli",
    "opencode": "opencode",
}


def initialize(server: McpProcess, client: str) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client}}
    server.request("initialize", params)
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def enter(server: McpProcess, ref: str) -> tuple[str, str]:
    """A keyless enter over MCP: (the reply's text, its session key)."""
    text, is_error = server.tool(event="enter", params={"stateMachine": "dev", "issueId": ref})
    assert not is_error, text
    header = next(line for line in text.split("\n") if line.startswith("session "))
    return text, header.split()[1]


def session_start(name: str, project: Path, env: dict[str, str], host: str = "h-1") -> None:
    field = "sessionId" if name == "copilot" else "session_id"
    stdin = json.dumps({field: host, "cwd": str(project)})
    ran = smllm(["harness", "hook", name, "session-start"], project, env, stdin=stdin)
    assert ran.code == 0, ran.err


@pytest.mark.parametrize("name", list(CLIENTS))
def test_installed_hooks_that_never_ran_are_noted(
    name: str, project: Path, env: dict[str, str]
) -> None:
    assert smllm(["harness", "install", name], project, env).code == 0
    with McpProcess(project, env) as server:
        initialize(server, CLIENTS[name])
        text, key = enter(server, "GH-1")
        first, rest = text.split("\n", 1)
        assert first == not_running_note(name)
        assert rest.startswith("<smllm>\nsession ")
        view, _ = server.tool(session=key)
        assert view.split("\n", 1)[0] == not_running_note(name)
        session_start(name, project, env)  # the client's hooks run now
        after, _ = server.tool(session=key)
        assert after.startswith("<smllm>\n")
        assert server.close() == 0


def test_the_notes_name_each_clients_fix() -> None:
    assert not_running_note("codex") == (
        "note: smllm's hooks for Codex are installed here but didn't run for this session, so "
        "your stops won't be held; ask the user to trust smllm's three hooks in Codex's /hooks "
        "(Codex skips untrusted hooks without a word) and to trust this project"
    )
    assert "trust this folder in Copilot CLI" in not_running_note("copilot")
    assert "restart Claude Code" in not_running_note("claude")
    assert "opencode --print-logs" in not_running_note("opencode")


@pytest.mark.parametrize(
    ("installed", "client"),
    [(None, "claude-code"), ("codex", "claude-code"), ("claude", "some-other-client")],
)
def test_no_note_without_that_clients_hooks(
    installed: str | None, client: str, project: Path, env: dict[str, str]
) -> None:
    if installed:
        assert smllm(["harness", "install", installed], project, env).code == 0
    with McpProcess(project, env) as server:
        initialize(server, client)
        text, _ = enter(server, "GH-2")
        assert text.startswith("<smllm>\n")
        assert server.close() == 0


def test_a_session_bound_by_the_hook_gets_no_note(project: Path, env: dict[str, str]) -> None:
    assert smllm(["harness", "install", "claude"], project, env).code == 0
    session_start("claude", project, env)
    key = json.loads(smllm(["session", "list", "--json"], project, env).out)["sessions"][0]["key"]
    with McpProcess(project, env) as server:
        initialize(server, "claude-code")
        text, is_error = server.tool(session=key)
        assert not is_error and text.startswith("<smllm>\n")
        assert server.close() == 0


def test_status_says_when_each_hook_last_ran(project: Path, env: dict[str, str]) -> None:
    assert smllm(["harness", "install", "codex"], project, env).code == 0
    status = smllm(["harness", "status", "codex"], project, env)
    assert status.code == 0
    assert status.out.splitlines()[-1] == (
        "hooks last ran: session-start never, user-prompt-submit never, stop never"
    )
    session_start("codex", project, env)
    key = json.loads(smllm(["session", "list", "--json"], project, env).out)["sessions"][0]["key"]
    fire = ["fire", "--session", key, "enter", "--param", "stateMachine=dev"]
    assert smllm([*fire, "--param", "issueId=GH-1"], project, env).code == 0
    stdin = json.dumps({"session_id": "h-1", "cwd": str(project), "stop_hook_active": False})
    stop = smllm(["harness", "hook", "codex", "stop"], project, env, stdin=stdin)
    assert json.loads(stop.out)["decision"] == "block"
    report = json.loads(smllm(["harness", "status", "codex", "--json"], project, env).out)
    audit = json.loads(smllm(["session", "show", key, "--audit", "--json"], project, env).out)
    at = {a["kind"]: a["at"] for a in audit["audit"]}
    assert report["lastRan"] == {
        "session-start": at["bind"],
        "user-prompt-submit": None,
        "stop": at["block"],
    }
    text = smllm(["harness", "status", "codex"], project, env).out.splitlines()[-1]
    assert text == (
        f"hooks last ran: session-start {at['bind'][:10]} {at['bind'][11:16]} UTC, "
        f"user-prompt-submit never, stop {at['block'][:10]} {at['block'][11:16]} UTC"
    )
    # another client's hooks, and another project's sessions, don't count
    claude = json.loads(smllm(["harness", "status", "claude", "--json"], project, env).out)
    assert "lastRan" not in claude  # claude's hooks aren't installed (only the shared region)
    assert smllm(["harness", "install", "claude"], project, env).code == 0
    claude = json.loads(smllm(["harness", "status", "claude", "--json"], project, env).out)
    assert claude["lastRan"] == dict.fromkeys(("session-start", "user-prompt-submit", "stop"))
