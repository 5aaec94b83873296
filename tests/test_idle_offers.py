"""A view never offers what the data it read already says will be refused (issue 8)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import enter_args, smllm


def _events(text: str) -> list[str]:
    body = text.split("<events>\n", 1)[1].split("</events>", 1)[0]
    return [line[2:].split(":", 1)[0] for line in body.splitlines() if line.startswith("- ")]


def test_resume_is_not_offered_once_the_slot_was_taken_over(
    project: Path, env: dict[str, str]
) -> None:
    keys = [json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]]
    keys.append(json.loads(smllm(["session", "new", "--json"], project, env).out)["session"])
    a, b = keys
    assert smllm(enter_args(a, "GH-1"), project, env).code == 0
    ran = smllm(["fire", "--session", a, "unmatched"], project, env)
    assert ran.code == 0 and _events(ran.out) == ["enter", "resume"]
    assert _events(smllm(["session", "show", a], project, env).out) == ["enter", "resume"]
    assert smllm(enter_args(b, "GH-1"), project, env).code == 0  # a takeover
    shown = smllm(["session", "show", a], project, env)
    assert _events(shown.out) == ["enter"]
    # fired anyway (from an older view), resume gets its §5.2 message and empties the slot
    ran = smllm(["fire", "--session", a, "resume"], project, env)
    assert ran.code == 1
    assert f"\nerror: GH-1 moved to session {b}\n" in ran.out, ran.out
    assert _events(ran.out) == ["enter"]
    ran = smllm(["fire", "--session", a, "resume"], project, env)
    assert ran.code == 1
    assert "\nerror: resume is not offered in idle (offered: enter)\n" in ran.out
