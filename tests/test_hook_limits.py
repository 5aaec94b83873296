"""The hook's input limits (cli-and-harnesses.md §5): up to STDIN_LIMIT bytes of input are
read and answered, one byte more is a failure that says so (exit 1, stdout empty: the client
goes on); a client session id of up to ID_LIMIT characters is one, a longer one is not (the
hook stays out of it)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import smllm
from helpers.hook_runs import context

from smllm.harness.hook import ID_LIMIT, STDIN_LIMIT


def sized(size: int, project: Path, host: str = "h1") -> str:
    """A session-start payload of exactly SIZE bytes (a long prompt rides along)."""
    body = {"session_id": host, "cwd": str(project), "prompt": ""}
    body["prompt"] = "p" * (size - len(json.dumps(body)))
    text = json.dumps(body)
    assert len(text.encode()) == size
    return text


def test_an_input_of_exactly_the_limit_is_answered(project: Path, env: dict[str, str]) -> None:
    ran = smllm(
        ["harness", "hook", "claude", "session-start"],
        project,
        env,
        stdin=sized(STDIN_LIMIT, project),
    )
    assert ran.code == 0 and ran.err == "", ran.err
    assert context("claude", ran.out).startswith("<smllm>\nsession ")


def test_one_byte_past_the_limit_fails_open(project: Path, env: dict[str, str]) -> None:
    payload = sized(STDIN_LIMIT + 1, project)
    ran = smllm(["harness", "hook", "claude", "session-start"], project, env, stdin=payload)
    assert ran == (1, "", "error: the hook input is larger than 32 MiB\n")


def test_a_session_id_of_up_to_the_limit_is_one(project: Path, env: dict[str, str]) -> None:
    longest = sized(400 + ID_LIMIT, project, "i" * ID_LIMIT)
    ran = smllm(["harness", "hook", "claude", "session-start"], project, env, stdin=longest)
    assert ran.code == 0 and context("claude", ran.out).startswith("<smllm>\nsession "), ran
    too_long = sized(400 + ID_LIMIT, project, "i" * (ID_LIMIT + 1))
    ran = smllm(["harness", "hook", "claude", "session-start"], project, env, stdin=too_long)
    assert ran == (0, "{}\n", "")
