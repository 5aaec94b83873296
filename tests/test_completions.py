"""`smllm completions`: scripts made from the parser; the bash one is run for real."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import require_tool, smllm


def _complete(script: Path, *words: str) -> str:
    line = " ".join(f"'{w}'" for w in words)
    code = (
        f"source {script}\nCOMP_WORDS=({line})\nCOMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n"
        '_smllm\necho "${COMPREPLY[*]}"\n'
    )
    return subprocess.run(
        ["bash", "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_bash(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["completions", "bash"], tmp_path, env)
    assert ran.code == 0
    script = tmp_path / "smllm.bash"
    script.write_text(ran.out)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert _complete(script, "smllm", "se") == "session"
    assert _complete(script, "smllm", "session", "") == "list show new --help --config"
    assert _complete(script, "smllm", "session", "show", "--a") == "--audit"
    assert _complete(script, "smllm", "--config", "x.toml", "va") == "validate"
    assert "--params" in _complete(script, "smllm", "fire", "--").split()


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_name_every_command(tmp_path: Path, env: dict[str, str], shell: str) -> None:
    ran = smllm(["completions", shell], tmp_path, env)
    assert ran.code == 0
    for word in (
        "init",
        "new",
        "fire",
        "session",
        "instance",
        "validate",
        "graph",
        "info",
        "completions",
        "demo",
        "audit",
        "params",
    ):
        assert word in ran.out, word


def test_another_shell(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["completions", "tcsh"], tmp_path, env)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "error: no completions for tcsh (shells: bash, zsh, fish)\n"


def test_fish_completes(tmp_path: Path, env: dict[str, str]) -> None:
    fish = require_tool("fish", "apt-get install fish")
    script = tmp_path / "smllm.fish"
    script.write_text(smllm(["completions", "fish"], tmp_path, env).out)

    def complete(line: str) -> list[str]:
        ran = subprocess.run(
            [fish, "--no-config", "-c", f"source {script}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            check=True,
        )
        return ran.stdout.split()

    assert complete("smllm se") == ["session"]
    assert complete("smllm session ") == ["list", "new", "show"]
    assert complete("smllm fire --par") == ["--param", "--params"]


def test_zsh_script_parses(tmp_path: Path, env: dict[str, str]) -> None:
    zsh = require_tool("zsh", "apt-get install zsh")
    script = tmp_path / "_smllm"
    script.write_text(smllm(["completions", "zsh"], tmp_path, env).out)
    assert subprocess.run([zsh, "-n", str(script)]).returncode == 0
