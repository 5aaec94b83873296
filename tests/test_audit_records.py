"""What the audit says (issue 20 §8): a prompt's record shows the session's values after the
prompt and what it cleared; an event whose guard ran a while is timed at its commit too."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from conftest import smllm, write_machine
from helpers.slow_machine import slow_machine

SLOW = slow_machine(1.5)


def audit(key: str, project: Path, env: dict[str, str]) -> tuple[list[dict[str, object]], str]:
    records = smllm(["session", "show", key, "--audit", "--json"], project, env)
    text = smllm(["session", "show", key, "--audit"], project, env)
    assert records.code == text.code == 0
    listed: list[dict[str, object]] = json.loads(records.out)["audit"]
    return listed, text.out


def test_a_guard_that_ran_a_while_is_timed_at_its_commit(
    project: Path, env: dict[str, str]
) -> None:
    write_machine(project, "slow", SLOW)
    enter = ["fire", "enter", "--param", "stateMachine=slow", "--param", "taskId=T-1", "--json"]
    key = json.loads(smllm(enter, project, env).out)["session"]
    assert smllm(["fire", "--session", key, "checked"], project, env).code == 0
    records, text = audit(key, project, env)
    entered, checked = [r for r in records if r["kind"] == "event"]
    assert "committed" not in entered  # a quick call: its one time
    started = datetime.fromisoformat(str(checked["at"]).replace("Z", "+00:00"))
    committed = datetime.fromisoformat(str(checked["committed"]).replace("Z", "+00:00"))
    assert 1.5 <= (committed - started).total_seconds() < 30
    line = text.splitlines()[-1]
    assert line.endswith(
        f"  event  checked slow T-1 WORK → DONE (committed {str(checked['committed'])[11:19]} UTC)"
    )


def test_a_prompt_record_shows_the_values_after_it(project: Path, env: dict[str, str]) -> None:
    stdin = json.dumps({"session_id": "h1", "cwd": str(project)})
    assert (
        smllm(["harness", "hook", "claude", "session-start"], project, env, stdin=stdin).code == 0
    )
    key = json.loads(smllm(["session", "list", "--json"], project, env).out)["sessions"][0]["key"]
    enter = ["fire", "--session", key, "enter", "--param", "stateMachine=dev"]
    assert smllm([*enter, "--param", "issueId=GH-1"], project, env).code == 0
    assert smllm(["fire", "--session", key, "yield"], project, env).code == 0
    prompt = json.dumps({"session_id": "h1", "cwd": str(project), "prompt": "go on"})
    ran = smllm(["harness", "hook", "claude", "user-prompt-submit"], project, env, stdin=prompt)
    assert ran.code == 0
    records, text = audit(key, project, env)
    assert records[-1]["kind"] == "prompt"
    assert {k: v for k, v in records[-1].items() if k != "at"} == {
        "kind": "prompt",
        "yielded": False,
        "blocks": 0,
        "cleared": {"yielded": True, "blocks": 0},
    }
    assert text.splitlines()[-1].endswith(
        "  prompt  yielded=False, blocks=0 (cleared yield and 0 blocks)"
    )
    # a stop the hook blocked, then a prompt: it clears the block, and no yield
    stop = json.dumps({"session_id": "h1", "cwd": str(project), "stop_hook_active": False})
    assert smllm(["harness", "hook", "claude", "stop"], project, env, stdin=stop).code == 0
    again = smllm(["harness", "hook", "claude", "user-prompt-submit"], project, env, stdin=prompt)
    assert again.code == 0
    records, text = audit(key, project, env)
    assert records[-1]["cleared"] == {"yielded": False, "blocks": 1}
    assert text.splitlines()[-1].endswith("  prompt  yielded=False, blocks=0 (cleared 1 blocks)")
