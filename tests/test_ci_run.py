""".ci/run and scripts/test themselves: a CI run can't pass without testing (issue 12 §2).

The two scripts run for real in a copy of the repo's layout, with every program they call
replaced by a stub on PATH (python, pip through `python -m pip`, pytest through `python -m
pytest`, ruff, mypy, apt's tools, npm): a failing step must fail the run, and so must a pytest
that reports no passed test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PYTHON_STUB = """#!/usr/bin/env bash
# a stand-in for python: what the scripts ask of it, answered from the environment
case "$1 $2" in
  "-m pip") exit "${PIP_CODE:-0}" ;;
  "-m pytest") printf '%s\\n' "${PYTEST_OUT-}"; exit "${PYTEST_CODE:-0}" ;;
  "-c import torch") exit 0 ;;
esac
case "$1" in
  -c) echo 2.13.0+cpu; exit 0 ;;
  bench/*) [ "$1" = "${BENCH_FAIL-}" ] && exit 1; exit 0 ;;
esac
exit 0
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The scripts in a bare copy of the repo's layout, with the npm packages present (so
    nothing is installed) and a stub for every program they run."""
    root = tmp_path / "repo"
    for rel in (".ci/run", "scripts/test"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, root / rel)
    present = [
        "tests/mermaid/node_modules/mermaid/package.json",
        "tests/clients/node_modules/.bin/claude",
        "tests/clients/node_modules/.bin/codex",
        "tests/clients/node_modules/.bin/copilot",
        "tests/clients/node_modules/opencode-linux-x64/bin/opencode",
    ]
    for rel in present:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "python").write_text(PYTHON_STUB)
    for name in ("sqlite3", "dot", "zsh", "fish", "node", "npm", "ruff", "mypy", "apt-get"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    return root


def run(repo: Path, **env: str) -> tuple[int, str]:
    stubs = repo.parent / "stubs"
    environment = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "HOME": str(repo.parent),
        "CI": "true",
        **env,
    }
    done = subprocess.run(
        [str(repo / ".ci" / "run")],
        cwd=repo,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def test_a_green_run_passes(repo: Path) -> None:
    code, out = run(repo, PYTEST_OUT="1141 passed in 378.20s")
    assert code == 0, out
    assert "==> scripts/test: all passed" in out


def test_a_failing_install_fails_the_run(repo: Path) -> None:
    code, out = run(repo, PIP_CODE="1", PYTEST_OUT="3 passed")
    assert code != 0
    assert "FAILED: pip install" in out


def test_failing_tests_fail_the_run(repo: Path) -> None:
    code, out = run(repo, PYTEST_OUT="1 failed, 2 passed", PYTEST_CODE="1")
    assert code != 0
    assert "FAILED: pytest" in out


@pytest.mark.parametrize(
    "output",
    ["", "no tests ran in 0.01s", "5 deselected in 0.2s", "1 error in 0.5s", "10 skipped"],
)
def test_a_run_without_a_passed_test_fails(repo: Path, output: str) -> None:
    code, out = run(repo, PYTEST_OUT=output)
    assert code != 0
    assert "pytest reported no passed test" in out


def test_a_skipped_test_fails_the_run(repo: Path) -> None:
    code, out = run(repo, PYTEST_OUT="40 passed, 1 skipped in 3.00s")
    assert code != 0
    assert "FAILED: pytest skipped tests" in out


@pytest.mark.parametrize(
    "bench", ["bench.py", "hook_bench.py", "mcp_bench.py", "smi_bench.py", "run_bench.py"]
)
def test_a_crashing_benchmark_fails_the_run(repo: Path, bench: str) -> None:
    (repo / "bench").mkdir()
    (repo / "bench" / "bench.py").write_text("")
    assert run(repo, PYTEST_OUT="3 passed")[0] == 0
    code, out = run(repo, PYTEST_OUT="3 passed", BENCH_FAIL=f"bench/{bench}")
    assert code != 0, out


def test_the_scripts_are_executable() -> None:
    for rel in (".ci/run", "scripts/test"):
        assert os.access(ROOT / rel, os.X_OK), rel
