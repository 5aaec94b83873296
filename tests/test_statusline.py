"""`smllm statusline` (cli-and-harnesses.md §7): one line for Claude Code's `statusLine`, from
`--session KEY` or from Claude's status JSON on stdin; read-only, always exit 0, nothing on
stdout (`{}` with --json) and the reason on stderr when there is nothing to show."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Ran, enter_args, smllm

KEYS = {"session", "idle", "machine", "state", "visit", "yielded", "instance", "interrupted"}
KEYS |= {"paused"}


def line(project: Path, env: dict[str, str], *args: str, stdin: str | None = None) -> Ran:
    ran = smllm(["statusline", *args], project, env, stdin=stdin)
    assert ran.code == 0, ran  # always
    return ran


def new_session(project: Path, env: dict[str, str]) -> str:
    key: str = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    return key


def test_in_a_machine_and_in_idle(project: Path, env: dict[str, str]) -> None:
    key = new_session(project, env)
    assert line(project, env, "--session", key, "--color", "never").out == "smllm idle\n"
    assert smllm(enter_args(key, "GH-1"), project, env).code == 0
    ran = line(project, env, "--session", key, "--color", "never")
    assert (ran.out, ran.err) == ("smllm dev › PLAN · issue GH-1\n", "")
    # a re-entry is a second visit; a yield shows
    fired = smllm(["fire", "--session", key, "planned", "--param", "size=small"], project, env)
    assert fired.code == 0
    assert smllm(["fire", "--session", key, "yield"], project, env).code == 0
    ran = line(project, env, "--session", key, "--color", "never")
    assert ran.out == "smllm dev › PLAN (visit 2) · issue GH-1 · yielded\n"
    ran = line(project, env, "--session", key, "--color", "always")
    assert ran.out == (
        "\x1b[2msmllm\x1b[0m \x1b[36mdev\x1b[0m › \x1b[1mPLAN\x1b[0m (visit 2) · "
        "\x1b[35missue GH-1\x1b[0m · \x1b[33myielded\x1b[0m\n"
    )
    data = json.loads(line(project, env, "--session", key, "--json").out)
    assert set(data) == KEYS
    assert data["idle"] is False and data["visit"] == 2 and data["yielded"] is True
    assert data["instance"]["label"] == "GH-1" and data["instance"]["kind"] == "issue"
    # unmatched (no fallback in dev): idle with the slot; a paused one counts
    assert smllm(["fire", "--session", key, "unmatched"], project, env).code == 0
    other = new_session(project, env)
    assert smllm(enter_args(other, "GH-2"), project, env).code == 0
    assert smllm(["fire", "--session", other, "pause"], project, env).code == 0
    ran = line(project, env, "--session", key, "--color", "never")
    assert ran.out == "smllm idle · interrupted issue GH-1 · 1 paused\n"
    data = json.loads(line(project, env, "--session", key, "--json").out)
    assert set(data) == KEYS
    assert (data["idle"], data["machine"], data["paused"]) == (True, None, 1)
    assert data["interrupted"]["status"] == "interrupted"


def test_an_edited_machine_shows_at_once(project: Path, env: dict[str, str]) -> None:
    """The status line reads the machines' summary from the compiled cache's header: a machine
    file edited since (its kind here) is read again, never shown stale."""
    key = new_session(project, env)
    assert smllm(enter_args(key, "GH-1"), project, env).code == 0
    ran = line(project, env, "--session", key, "--color", "never")
    assert ran.out == "smllm dev › PLAN · issue GH-1\n"
    machine = project / ".smllm" / "dev.smllm.yaml"
    machine.write_text(machine.read_text().replace("kind: issue", "kind: ticket"))
    ran = line(project, env, "--session", key, "--color", "never")
    assert (ran.out, ran.err) == ("smllm dev › PLAN · ticket GH-1\n", "")


def test_colour_follows_no_color_by_default(project: Path, env: dict[str, str]) -> None:
    key = new_session(project, env)
    assert line(project, env, "--session", key).out == "\x1b[2msmllm\x1b[0m idle\n"
    plain = line(project, {**env, "NO_COLOR": "1"}, "--session", key)
    assert plain.out == "smllm idle\n"
    assert line(project, {**env, "NO_COLOR": "1"}, "--session", key, "--color", "always").out == (
        "\x1b[2msmllm\x1b[0m idle\n"
    )


def test_from_claudes_status_json(
    project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from smllm.api.app import App

    monkeypatch.chdir(project)
    bound = App().new_session("claude", "claude-uuid-1", str(project))
    status = json.dumps({"session_id": "claude-uuid-1", "cwd": str(project), "model": {}})
    ran = line(project, env, "--color", "never", stdin=status)
    assert (ran.out, ran.err) == ("smllm idle\n", "")
    data = json.loads(line(project, env, "--json", stdin=status).out)
    assert data["session"] == bound.key


def test_nothing_to_show_prints_nothing(project: Path, env: dict[str, str]) -> None:
    cases = {
        "": "note: standard input is not a JSON object\n",
        "garbage{": "note: standard input is not a JSON object\n",
        "[1]": "note: the status JSON has no session_id\n",
        '{"session_id": 3}': "note: the status JSON has no session_id\n",
        '{"session_id": "unbound"}': "note: no smllm session is bound to Claude session unbound\n",
        "x" * (2 << 20): "note: standard input is larger than 1 MiB: not a status JSON\n",
    }
    for stdin, reason in cases.items():
        ran = line(project, env, stdin=stdin)
        assert (ran.out, ran.err) == ("", reason), stdin[:40]
        ran = line(project, env, "--json", stdin=stdin)
        assert (ran.out, ran.err) == ("{}\n", reason), stdin[:40]
    ran = line(project, env, "--session", "sm-nope00")
    assert ran.out == "" and ran.err.startswith("error: no session sm-nope00")


def test_a_stdin_that_never_closes_does_not_hang(project: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "smllm", "statusline"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    began = time.monotonic()
    try:
        assert proc.stdin is not None
        proc.stdin.write('{"session_id": "x"')  # and never closed
        proc.stdin.flush()
        out, err = _wait(proc)
    finally:
        proc.kill()
    assert time.monotonic() - began < 15
    assert (proc.returncode, out) == (0, "")
    assert err == "note: standard input didn't close within 1 s\n"


def _wait(proc: subprocess.Popen[str]) -> tuple[str, str]:
    assert proc.stdout is not None and proc.stderr is not None
    proc.wait(timeout=15)
    return proc.stdout.read(), proc.stderr.read()
