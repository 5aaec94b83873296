"""Install files a team commits (issue 20 §2): a project's files run plain `smllm`, the same
bytes on two machines whose smllm lives in different places; both say `current`; a file an
older install wrote with its absolute path is `stale` and rewritten without --force; status
says when the PATH a client inherits lacks smllm or finds another one; user-scope files keep
the absolute path (PowerShell's `&` before a quoted one)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, Ran, write_machine

NAMES = ("claude", "codex", "copilot", "opencode", "agents")
OLD = "/home/ann/.venvs/x y/bin/smllm"  # where an older install found smllm


def snapshot(*folders: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under the folders (but .smllm/): bytes and mtime (ns)."""
    return {
        str(path): (path.read_bytes(), path.stat().st_mtime_ns)
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".smllm" not in path.parts
    }


def aged(value: Any, key: str = "") -> Any:
    """A JSON value with each `smllm` command as an older install wrote it: by OLD's path."""
    if isinstance(value, dict):
        return {k: aged(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [aged(v) for v in value]
    if value == "smllm":
        return OLD
    if isinstance(value, str) and value.startswith("smllm "):
        return ("& " if key == "powershell" else "") + shlex.quote(OLD) + value[5:]
    return value


def other_smllm(folder: Path) -> Path:
    """An smllm installed somewhere else (a folder with a space in its name): a `python` link
    to this interpreter and an `smllm` script beside it, as a virtual environment has."""
    bin_dir = folder / "other place" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    script = bin_dir / "smllm"
    script.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m smllm "$@"\n')
    script.chmod(0o755)
    return script


def run(smllm: Path | None, args: list[str], cwd: Path, env: dict[str, str]) -> Ran:
    """`smllm ARGS` through this interpreter (None) or through another install's script."""
    argv = [sys.executable, "-m", "smllm"] if smllm is None else [str(smllm)]
    done = subprocess.run(
        [*argv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def states(ran: Ran) -> dict[str, str]:
    assert ran.code == 0, ran.err
    return {p["part"]: p.get("action", p["state"]) for p in json.loads(ran.out)["parts"]}


def test_two_machines_write_the_same_bytes(
    project: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    other = other_smllm(tmp_path)
    for name in NAMES:
        assert states(run(None, ["harness", "install", name, "--json"], project, env))
    mine = snapshot(project)
    text = "".join(data.decode() for data, _ in mine.values())
    assert sys.prefix not in text and str(tmp_path) not in text  # no one's path in a project
    teammate = {**env, "PATH": f"{other.parent}{os.pathsep}{env['PATH']}"}
    for name in NAMES:
        status = states(run(other, ["harness", "status", name, "--json"], project, teammate))
        assert set(status.values()) == {"current"}, (name, status)
        again = states(run(other, ["harness", "install", name, "--json"], project, teammate))
        assert set(again.values()) == {"current"}, (name, again)
    assert snapshot(project) == mine  # mtimes too: nothing rewritten


def test_an_absolute_path_from_an_older_install_is_stale(
    project: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    for name in NAMES:
        assert states(run(None, ["harness", "install", name, "--json"], project, env))
    current = {path: data for path, (data, _) in snapshot(project).items()}
    for path in current:
        text = Path(path).read_text()
        if path.endswith("smllm.js"):  # the asset with the path as a JSON string
            text = (ROOT.parent / "src/smllm/harness/assets/opencode-plugin.js").read_text()
            text = text.replace("__SMLLM__", json.dumps(OLD))
        elif path.endswith(".json"):
            text = json.dumps(aged(json.loads(text)), indent=2) + "\n"
        elif path.endswith(".toml"):
            text = text.replace('command = "smllm"', f"command = {json.dumps(OLD)}")
        Path(path).write_text(text)
    edited = {path for path, data in current.items() if Path(path).read_bytes() != data}
    assert {Path(p).name for p in edited} == {
        "settings.json",
        ".mcp.json",
        "config.toml",
        "hooks.json",
        "smllm.json",
        "opencode.json",
        "smllm.js",
    }
    for name in ("claude", "codex", "copilot", "opencode"):
        status = states(run(None, ["harness", "status", name, "--json"], project, env))
        assert "stale" in status.values() and "edited" not in status.values(), (name, status)
        fixed = states(run(None, ["harness", "install", name, "--json"], project, env))
        assert "written" in fixed.values() and "edited, left alone" not in fixed.values()
    assert {path: data for path, (data, _) in snapshot(project).items()} == current


def test_a_hand_edit_beside_a_path_is_still_edited(project: Path, env: dict[str, str]) -> None:
    assert states(run(None, ["harness", "install", "codex", "--json"], project, env))
    config = project / ".codex" / "config.toml"
    config.write_text(
        config.read_text()
        .replace('command = "smllm"', 'command = "/x/bin/smllm"')
        .replace('"approve"', '"prompt"')
    )
    assert states(run(None, ["harness", "status", "codex", "--json"], project, env))["mcp"] == (
        "edited"
    )


def test_status_says_when_path_lacks_smllm_or_finds_another(
    project: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    assert run(None, ["harness", "install", "copilot"], project, env).code == 0
    bare = {**env, "PATH": "/usr/bin:/bin"}
    missing = run(None, ["harness", "status", "copilot"], project, bare)
    assert missing.code == 0
    assert "note: smllm is not on PATH here (this one is " in missing.err
    assert "pipx install smllm" in missing.err and "--scope user" in missing.err
    other = other_smllm(tmp_path)
    elsewhere = {**env, "PATH": f"{other.parent}{os.pathsep}{env['PATH']}"}
    another = run(None, ["harness", "status", "copilot"], project, elsewhere)
    assert f"note: the smllm on PATH is {other}, not this one (" in another.err
    assert "not on PATH" not in run(None, ["harness", "status", "copilot"], project, env).err


@pytest.mark.parametrize("name", ["claude", "codex", "copilot", "opencode"])
def test_user_scope_keeps_the_absolute_path(
    name: str, project: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    other = other_smllm(tmp_path)
    home = Path(env["HOME"])
    home.mkdir(exist_ok=True)
    args = ["harness", "install", name, "--scope", "user", "--without", "mcp", "--json"]
    assert states(run(other, args, project, env))
    files = snapshot(home, tmp_path / "xdg-config")
    written = "".join(data.decode() for data, _ in files.values())
    assert str(other) in written
    if name == "copilot":
        hooks = json.loads((home / ".copilot" / "hooks" / "smllm.json").read_text())["hooks"]
        stop = hooks["agentStop"][0]
        assert stop["bash"] == f"'{other}' harness hook copilot stop"
        assert stop["powershell"] == f"& '{other}' harness hook copilot stop"
    status = states(
        run(other, ["harness", "status", name, "--scope", "user", "--json"], project, env)
    )
    assert set(status.values()) <= {"current", "declined"}


LONG = """\
id: long
description: A guard that may run for an hour.
initial: A
meta:
  smllm: 1
  events:
    done: { description: Fire after the suite passes. }
states:
  A:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: Run the suite. } }
    on:
      done:
        - { target: B, guard: { type: command, params: { run: "true", timeoutSecs: 3600 } } }
        - { target: A, reenter: true }
  B:
    type: final
"""


def test_each_clients_tool_timeout_covers_the_longest_guard(
    project: Path, env: dict[str, str]
) -> None:
    for name in ("claude", "codex", "copilot", "opencode"):
        assert states(run(None, ["harness", "install", name, "--json"], project, env))
    mcp = json.loads((project / ".mcp.json").read_text())["mcpServers"]["smllm"]
    assert mcp["timeout"] == 900_000  # 15 minutes when every command keeps the 60 s default
    assert "tool_timeout_sec = 900\n" in (project / ".codex" / "config.toml").read_text()
    write_machine(project, "long", LONG)
    for name in ("claude", "codex", "copilot", "opencode"):
        status = states(run(None, ["harness", "status", name, "--json"], project, env))
        assert status["mcp"] == "stale", (name, status)  # smllm's value, not an edit
    for name in ("claude", "codex", "copilot", "opencode"):
        fixed = states(run(None, ["harness", "install", name, "--json"], project, env))
        assert fixed["mcp"] in ("written", "current"), (name, fixed)  # .mcp.json is shared
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["smllm"]["timeout"] == (
        3_660_000
    )
    assert "tool_timeout_sec = 3660\n" in (project / ".codex" / "config.toml").read_text()
    assert json.loads((project / "opencode.json").read_text())["mcp"]["smllm"]["timeout"] == (
        3_660_000
    )
