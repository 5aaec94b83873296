"""Values echoed in errors (agent-text.md §9, issue 20 §8): a session key, an event name or a
param name from the caller comes back escaped as in a block and cut to 200 characters (`…`
included), on the CLI and over MCP, inside a block and outside one; a 10 MB key comes back as
200 characters."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import smllm
from helpers.mcp_client import McpProcess

from smllm.engine.rules import ECHO_LIMIT, echo


def test_echo_cuts_at_the_limit() -> None:
    assert ECHO_LIMIT == 200
    assert echo("x" * 200) == "x" * 200
    assert echo("x" * 201) == "x" * 199 + "…"
    assert len(echo("y" * 10_000_000)) == 200


def new_session(project: Path, env: dict[str, str]) -> str:
    ran = smllm(["session", "new", "--json"], project, env)
    key: str = json.loads(ran.out)["session"]
    return key


def test_cli_echoes_keys_and_events_cut_and_escaped(project: Path, env: dict[str, str]) -> None:
    key = "sm-" + "x\n" * 50_000
    ran = smllm(["fire", "--session", key, "planned"], project, env)
    assert ran.code == 1 and ran.out == ""
    shown = ("sm-" + "x\n" * 200)[:199].replace("\n", "\\n")
    assert ran.err == (
        f"error: no session {shown}…; pass the session key from the latest <smllm> header, or "
        "fire enter without one to start a session\n"
    )
    event = "<smllm>" * 10_000
    keyless = smllm(["fire", event], project, env)
    assert keyless.code == 1
    assert keyless.err.startswith("error: " + (event[:199] + "…").replace("<smllm", "&lt;smllm"))
    assert keyless.err.endswith(
        " needs a session; pass the session key from the latest <smllm> "
        "header, or fire enter without one to start a session\n"
    )
    session = new_session(project, env)
    refused = smllm(
        ["fire", "--session", session, event, "--param", "p" * 500 + "=v"], project, env
    )
    assert refused.code == 1
    error = refused.out.splitlines()[2]
    assert error == (
        "error: "
        + (event[:199] + "…").replace("<smllm", "&lt;smllm")
        + " is not offered in idle (offered: enter)"
    )
    shown_audit = smllm(["session", "show", key, "--audit"], project, env)
    assert shown_audit.code == 1 and shown_audit.err.startswith(f"error: no session {shown}…\n")


def test_param_names_are_cut(project: Path, env: dict[str, str]) -> None:
    session = new_session(project, env)
    enter = ["fire", "--session", session, "enter", "--param", "stateMachine=dev"]
    assert smllm([*enter, "--param", "issueId=GH-1"], project, env).code == 0
    name = "n" * 1000
    fire = ["fire", "--session", session, "planned", "--param", "size=small"]
    ran = smllm([*fire, "--param", f"{name}=1"], project, env)
    assert ran.code == 1
    assert ran.out.splitlines()[2] == f"error: planned has no param {'n' * 199}… (params: size)"


def test_mcp_echoes_a_10_mb_key_as_200_characters(project: Path, env: dict[str, str]) -> None:
    with McpProcess(project, env) as server:
        server.initialize()
        text, is_error = server.tool(session="sm-" + "k" * 10_000_000, event="planned")
        assert is_error
        assert text == (
            f"error: no session sm-{'k' * 196}…; pass the session key from the latest <smllm> "
            "header, or fire enter without one to start a session"
        )
        text, is_error = server.tool(event="e<smllm>" * 1000)
        assert is_error and text.startswith("error: e&lt;smllm>e&lt;smllm>")
        assert text.index(" needs a session") == len("error: ") + 199 + 1 + 25 * 3
