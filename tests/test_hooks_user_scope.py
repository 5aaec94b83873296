"""A user-scope install outside projects (issue 20 §6): a user config that only records a
harness's declined parts (`--scope user --without mcp`) doesn't make every folder an smllm
project, so the session-start hook stays quiet and makes no session there; a user config that
lists machines, or one that can't be read, still does (its machines, or its problem, are
shown)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import smllm


def session_start(folder: Path, env: dict[str, str]) -> str:
    payload = json.dumps({"session_id": "host-1", "cwd": str(folder)})
    ran = smllm(["harness", "hook", "claude", "session-start"], folder, env, stdin=payload)
    assert ran.code == 0, ran.err
    return ran.out


def sessions(folder: Path, env: dict[str, str]) -> list[object]:
    ran = smllm(["session", "list", "--json"], folder, env)
    assert ran.code == 0, ran.err
    listed: list[object] = json.loads(ran.out)["sessions"]
    return listed


@pytest.fixture
def elsewhere(tmp_path: Path, env: dict[str, str]) -> Path:
    folder = tmp_path / "not-a-project"
    folder.mkdir()
    return folder


def test_declined_parts_alone_keep_the_hooks_quiet(elsewhere: Path, env: dict[str, str]) -> None:
    Path(env["HOME"]).mkdir(exist_ok=True)
    args = ["harness", "install", "claude", "--scope", "user", "--without", "mcp"]
    assert smllm(args, elsewhere, env).code == 0
    user_config = Path(env["XDG_CONFIG_HOME"]) / "smllm" / "config.toml"
    assert user_config.read_text() == '[harness.claude]\nwithout = ["mcp"]\n'
    assert session_start(elsewhere, env) == "{}\n"
    assert sessions(elsewhere, env) == []


def test_a_user_config_with_machines_makes_a_project(
    project: Path, elsewhere: Path, env: dict[str, str]
) -> None:
    user_config = Path(env["XDG_CONFIG_HOME"]) / "smllm" / "config.toml"
    user_config.parent.mkdir(parents=True)
    machine = project / ".smllm" / "dev.smllm.yaml"
    user_config.write_text(f"[machines]\nfiles = [{json.dumps(str(machine))}]\n")
    text = json.loads(session_start(elsewhere, env))["hookSpecificOutput"]["additionalContext"]
    assert text.startswith("<smllm>\nsession sm-") and "- dev:" in text
    assert len(sessions(elsewhere, env)) == 1


def test_a_broken_user_config_is_shown(elsewhere: Path, env: dict[str, str]) -> None:
    user_config = Path(env["XDG_CONFIG_HOME"]) / "smllm" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("[harness.claude\nwithout = 1\n")
    text = json.loads(session_start(elsewhere, env))["hookSpecificOutput"]["additionalContext"]
    assert text.startswith("<smllm>\nsession sm-")
    assert len(sessions(elsewhere, env)) == 1
