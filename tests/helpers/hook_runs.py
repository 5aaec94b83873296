"""Running the hooks of `smllm harness hook NAME HOOK` through the real CLI, and what their
answers say (test_hooks.py and the hook tests around it use these): a harness's payload, the
session-start text, a session bound and holding issue GH-1 in PLAN, the text of a blocked stop,
a session's audit kinds, a stop hook process with its streams piped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Ran, smllm
from helpers.storerows import StoreRows

ID_FIELD = {"claude": "session_id", "codex": "session_id", "copilot": "sessionId"}
ID_FIELD["opencode"] = "session_id"

EVENTS = """\
<events>
- planned: Fire after you write the plan in PLAN.md.
    size (required, one of: small, large): How large the change is.
- yield: Stop for now and stay in PLAN.
    note (optional): What you are waiting for.
- pause: Put issue GH-1 aside and return to idle.
- unmatched: The request fits none of these; handle it from idle, then resume.
</events>
</smllm>"""


def block_text(key: str) -> str:
    """The text of a stop blocked in PLAN: the header and the events list, no instructions."""
    return (
        f"<smllm>\nsession {key} · dev › PLAN · issue GH-1\n"
        f'Fire one event: smllm({{ session: "{key}", event, params }})\n' + EVENTS
    )


def hook(
    name: str,
    which: str,
    payload: dict[str, Any] | str,
    cwd: Path,
    env: dict[str, str],
) -> Ran:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return smllm(["harness", "hook", name, which], cwd, env, stdin=stdin, timeout=30)


def payload(name: str, host: str, project: Path, **more: Any) -> dict[str, Any]:
    return {ID_FIELD[name]: host, "cwd": str(project), **more}


def start(name: str, host: str, project: Path, env: dict[str, str]) -> str:
    """Run session-start; the bound session's key."""
    ran = hook(name, "session-start", payload(name, host, project), project, env)
    assert ran.code == 0 and ran.err == "", ran
    text = context(name, ran.out)
    return text.split("\n")[1].split(" ")[1]


def context(name: str, out: str) -> str:
    """The session-start text of an answer, checking the harness's form."""
    answer = json.loads(out)
    assert out == json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n"
    if name == "copilot":
        assert list(answer) == ["additionalContext"]
        text: str = answer["additionalContext"]
    else:
        assert list(answer) == ["hookSpecificOutput"]
        inner = answer["hookSpecificOutput"]
        assert list(inner) == ["hookEventName", "additionalContext"]
        assert inner["hookEventName"] == "SessionStart"
        text = inner["additionalContext"]
    return text


def enter(key: str, project: Path, env: dict[str, str]) -> None:
    args = ["fire", "--session", key, "enter", "--param", "stateMachine=dev"]
    ran = smllm([*args, "--param", "issueId=GH-1"], project, env)
    assert ran.code == 0, ran


def audit(key: str, project: Path, env: dict[str, str]) -> list[str]:
    """The kinds of the session's audit records, oldest first."""
    ran = smllm(["session", "show", key, "--audit"], project, env)
    assert ran.code == 0, ran
    return [line.split("  ")[1] for line in ran.out.splitlines()]


def sessions(project: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    ran = smllm(["session", "list", "--json"], project, env)
    assert ran.code == 0, ran
    found: list[dict[str, Any]] = json.loads(ran.out)["sessions"]
    return found


def held(name: str, project: Path, env: dict[str, str], host: str = "h1") -> str:
    """A session bound to `host` of harness `name`, holding issue GH-1 in PLAN (taking it over
    when another session holds it), as the project's instance store says."""
    key = start(name, host, project, env)
    enter(key, project, env)
    rows = StoreRows.of(project, env)
    [issue] = rows.instance_rows(ref="GH-1")
    assert (issue["holder"], issue["state"], issue["status"]) == (key, "PLAN", "active")
    if rows.backend == "postgres":  # nothing went to a SQLite file instead
        assert not (project / ".smllm" / "state").exists()
    return key


def stop_process(project: Path, env: dict[str, str], text: bool) -> subprocess.Popen[Any]:
    """A real `smllm harness hook claude stop` with its three streams piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "smllm", "harness", "hook", "claude", "stop"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
    )
