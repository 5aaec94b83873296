"""Which modules a real `python -m smllm` process imports (test_hook_imports.py, the broker
tests, bench/bench.py): the process runs wrapped so that the names in `sys.modules` are
written to a file when it exits; `forbidden` and `slow` pick out those the warm hook path
must do without (FORBIDDEN, SLOW_STDLIB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import Ran

import smllm as smllm_package

#: top-level packages the warm hook path must not import
FORBIDDEN = frozenset(
    {
        "yaml",
        "_yaml",
        "jsonschema",
        "jsonschema_specifications",
        "referencing",
        "tomlkit",
        "mcp",
        "psycopg",
        "psycopg2",
        "tokenizers",
        "click",
        "typer",
        "rich",
        "pydantic",
        "pydantic_core",
        "anyio",
        "httpx",
        "torch",
        "transformers",
        "rwkv",
        "jinja2",
        "numpy",
    }
)

#: standard modules a warm `session show` or `fire` does without: each costs a millisecond or
#: more of a ~35 ms call (json's codec is reached through _json, pickle's through _pickle, and
#: the common forms of both commands skip argparse)
SLOW_STDLIB = frozenset({"json", "re", "enum", "pickle", "zlib", "typing", "argparse"})

# a hot command ends through os._exit, skipping exit handlers (smllm.cli.main._exit_now): the
# dump then goes just before it, and says so on its first line
_WRAPPER = """\
import atexit, os, runpy, sys

def _dump(how="exit handlers"):
    with open({out!r}, "w") as f:
        f.write(how + "\\n" + "\\n".join(sorted(sys.modules)))

atexit.register(_dump)
_exit = os._exit

def _quick(code):
    _dump("os._exit")
    _exit(code)

os._exit = _quick
sys.argv = {argv!r}
{run}
"""


def loaded(
    args: list[str] | None,
    cwd: Path,
    env: dict[str, str],
    out: Path,
    bare: bool = False,
    stdin: str = "",
) -> tuple[Ran, set[str]]:
    """Run `python -m smllm ARGS` (a bare interpreter when None); its result and sys.modules.
    `bare`: without site (-S), whose .pth files may import re or typing themselves, so that
    smllm's own imports show; smllm is then found through PYTHONPATH. `stdin`: its input."""
    run = "runpy.run_module('smllm', run_name='__main__', alter_sys=True)" if args else "pass"
    code = _WRAPPER.format(out=str(out), argv=["smllm", *(args or [])], run=run)
    flags = ["-S"] if bare else []
    if bare:
        env = {**env, "PYTHONPATH": str(Path(smllm_package.__file__).resolve().parent.parent)}
    # the input is in the pipe before the process starts, as a client's usually is by the time
    # its hook reads: whether `select` is imported must not depend on who runs first
    data = stdin.encode()
    assert len(data) < 65536, "the pipe must take the whole input before the child runs"
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    try:
        proc = subprocess.run(
            [sys.executable, *flags, "-c", code],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=read_end,
        )
    finally:
        os.close(read_end)
    # no dump means the process never reached its exit handlers: not "no modules" (a test
    # counting that as clean could pass on a crash)
    assert out.exists(), f"no module dump from {args}: rc {proc.returncode}, {proc.stderr[-500:]}"
    how, _, text = out.read_text().partition("\n")
    names = set(text.split())
    out.unlink()
    _ENDINGS[str(out)] = how
    return Ran(proc.returncode, proc.stdout, proc.stderr), names


#: dump path → how the last process that wrote it ended ("os._exit" or "exit handlers")
_ENDINGS: dict[str, str] = {}


def slow(
    args: list[str], cwd: Path, env: dict[str, str], tmp_path: Path, stdin: str = ""
) -> list[str]:
    """The SLOW_STDLIB modules `smllm ARGS` imports, run without site (see `loaded`), that an
    interpreter without site doesn't already have."""
    ran, base = loaded(None, cwd, env, tmp_path / "bare-base.txt", bare=True)
    assert ran.code == 0, ran.err
    ran, names = loaded(args, cwd, env, tmp_path / "bare.txt", bare=True, stdin=stdin)
    assert ran.code == 0, ran.err
    assert "smllm.cli.main" in names  # smllm ran
    return sorted(n for n in names - base if n in SLOW_STDLIB)


def forbidden(names: set[str], baseline: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The forbidden modules in `names`, less any a bare interpreter already has (a site
    hook of the environment is not smllm's doing)."""
    return sorted(
        n
        for n in names - baseline
        if n.split(".")[0] in FORBIDDEN
        or n in ("smllm.smi", "smllm.drive")
        or n.startswith(("smllm.smi.", "smllm.drive."))
    )
