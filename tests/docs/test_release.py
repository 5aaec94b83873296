"""The release check: `python -m build` makes an sdist and a wheel, `twine check` accepts both,
and the wheel installed alone in a fresh virtual environment (its dependencies from the package
index or pip's cache) runs `smllm demo` to the end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _require_module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.fail(
            f"needs the Python package `{name}`: pip install -e '.[docs]' "
            "(scripts/test installs it)"
        )


def _run(
    args: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    )
    return done


def test_build_check_install_demo(tmp_path: Path) -> None:
    _require_module("build")
    _require_module("twine")
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], timeout=600)
    wheels = sorted(dist.glob("smllm-*.whl"))
    sdists = sorted(dist.glob("smllm-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    checked = _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels + sdists)])
    assert checked.stdout.count("PASSED") == 2, checked.stdout

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheels[0])],
        timeout=600,
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.defpath}",
        "HOME": str(home),
        "TMPDIR": str(tmp_path),
        "LANG": "C.UTF-8",
    }
    demo = _run([str(env_dir / "bin" / "smllm"), "demo"], cwd=home, env=env, timeout=120)
    assert "Completed issue GH-12. You are now in idle." in demo.stdout, demo.stdout
    assert demo.stdout.rstrip().endswith("the guard kept it in PLAN until PLAN.md existed."), (
        demo.stdout[-400:]
    )
    # the wheel is what it runs: not the clone's src/
    where = _run([str(python), "-c", "import smllm; print(smllm.__file__)"], cwd=home, env=env)
    assert str(env_dir) in where.stdout, where.stdout
