"""A lone surrogate in a hook's input (issue 20 §8): JSON can carry `"\\ud800"`, which no
file or store can hold. The hook says so in a sentence (exit 1, empty stdout: fail open), never
`internal error: UnicodeEncodeError`; a prompt, only compared, is read with U+FFFD instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import smllm

HARNESSES = ("claude", "codex", "copilot", "opencode")
HOOKS = ("session-start", "user-prompt-submit", "stop")


def with_surrogate(payload: dict[str, str], code: str = "d800") -> str:
    """PAYLOAD as JSON, each `@` in it written as the escape of a lone surrogate."""
    return json.dumps(payload).replace("@", f"\\u{code}")


def id_field(name: str) -> str:
    return "sessionId" if name == "copilot" else "session_id"


def hook(
    name: str, which: str, raw: str, project: Path, env: dict[str, str]
) -> tuple[int, str, str]:
    ran = smllm(["harness", "hook", name, which], project, env, stdin=raw)
    return ran.code, ran.out, ran.err


@pytest.mark.parametrize("name", HARNESSES)
@pytest.mark.parametrize("which", HOOKS)
def test_a_surrogate_in_the_session_id_is_a_sentence(
    name: str, which: str, project: Path, env: dict[str, str]
) -> None:
    raw = with_surrogate({id_field(name): "a@b", "cwd": str(project)})
    code, out, err = hook(name, which, raw, project, env)
    assert (code, out) == (1, "")
    assert err == (
        f"error: the hook input's {id_field(name)} is not text: it holds a lone surrogate "
        "(\\ud800)\n"
    )


def test_a_surrogate_in_the_cwd_is_a_sentence(project: Path, env: dict[str, str]) -> None:
    raw = with_surrogate({"session_id": "h1", "cwd": f"{project}/@"}, "dc80")
    code, out, err = hook("claude", "session-start", raw, project, env)
    assert (code, out) == (1, "")
    assert err == "error: the hook input's cwd is not text: it holds a lone surrogate (\\udc80)\n"


def test_a_surrogate_in_the_prompt_is_read_as_a_replacement(
    project: Path, env: dict[str, str]
) -> None:
    start = json.dumps({"session_id": "h1", "cwd": str(project)})
    assert hook("claude", "session-start", start, project, env)[0] == 0
    key = json.loads(smllm(["session", "list", "--json"], project, env).out)["sessions"][0]["key"]
    enter = ["fire", "--session", key, "enter", "--param", "stateMachine=dev"]
    assert smllm([*enter, "--param", "issueId=GH-1"], project, env).code == 0
    assert smllm(["fire", "--session", key, "yield"], project, env).code == 0
    raw = with_surrogate({"session_id": "h1", "cwd": str(project), "prompt": "go @ on"})
    assert hook("claude", "user-prompt-submit", raw, project, env) == (0, "{}\n", "")
    shown = json.loads(smllm(["session", "show", key, "--json"], project, env).out)
    assert shown["session"]["yielded"] is False  # the prompt cleared the yield
