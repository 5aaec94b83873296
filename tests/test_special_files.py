"""No command blocks on a file (issue 8, defect 3): a FIFO, a unix socket or `/dev/zero`
behind a prompt path or behind a listed machine file is refused with a finding, and never
opened. Each is made just before the commands run, so the cache's check of files changed
within 2 s of its build (which compares content) sees it too.

Real `smllm` processes, each with a 20 s limit: a command that hangs fails the test.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Ran, smllm

HANG_S = 20  # far beyond the ~0.1 s each command takes: only a blocked read gets near it

NOT_CONFIGURED = (
    "note: .smllm/config.toml has errors, so machines in it aren't configured; "
    "smllm validate tells why\n"
)


def run(args: list[str], cwd: Path, env: dict[str, str]) -> Ran:
    """`smllm ARGS`; a command still running after HANG_S seconds fails the test."""
    ran = smllm(args, cwd, env, timeout=HANG_S)
    assert "Traceback" not in ran.err, ran.err
    return ran


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder with a short path: a unix socket's path is limited to ~100 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="sm-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)


def _kinds(short_dir: Path) -> list[tuple[str, Callable[[Path], object]]]:
    def fifo(path: Path) -> None:
        os.mkfifo(path)

    def unix_socket(path: Path) -> None:
        # bound in a short folder and linked to: the link's target is what every stat sees
        real = short_dir / f"{path.name}.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(real))
        sock.close()  # the socket file stays
        path.symlink_to(real)

    def dev_zero(path: Path) -> None:
        path.symlink_to("/dev/zero")

    return [("fifo", fifo), ("socket", unix_socket), ("zero", dev_zero)]


@pytest.mark.parametrize("kind", ["fifo", "socket", "zero"])
def test_a_prompt_file_that_is_no_regular_file(
    project: Path, env: dict[str, str], short_dir: Path, kind: str
) -> None:
    smllm_dir = project / ".smllm"
    machine = smllm_dir / "dev.smllm.yaml"
    text = machine.read_text()
    wanted = 'params: { text: "Summarise the change for the issue." }'
    assert wanted in text
    machine.write_text(text.replace(wanted, f"params: {{ file: {kind}.md }}"))
    line = next(i for i, s in enumerate(machine.read_text().splitlines(), 1) if "file:" in s)
    col = machine.read_text().splitlines()[line - 1].index(f"{kind}.md") + 1
    dict(_kinds(short_dir))[kind](smllm_dir / f"{kind}.md")

    ran = run(["validate"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        f".smllm/dev.smllm.yaml:{line}:{col}: error: states.DONE.entry.params.file: "
        f"prompt file {kind}.md: not a regular file (MCH-11)\n"
        "  hint: paths are relative to the machine file's folder\n"
        "1 error, 0 warnings, 0 info\n"
    )
    ran = run(["session", "new"], project, env)
    assert ran.code == 0
    assert ran.err == NOT_CONFIGURED.replace("config.toml", "dev.smllm.yaml")
    assert "No state machines are configured." in ran.out
    ran = run(["fire", "enter", "--param", "stateMachine=dev"], project, env)
    assert (ran.code, ran.err) == (1, NOT_CONFIGURED.replace("config.toml", "dev.smllm.yaml"))
    assert "error: enter param stateMachine " in ran.out  # refused: dev isn't configured
    # the engine's own read of a prompt file (SystemHost.read_prompt) refuses it as well
    from smllm.api.system import SystemHost
    from smllm.engine.host import PromptError

    with pytest.raises(PromptError, match=r"^not a regular file$"):
        SystemHost({}).read_prompt(str(smllm_dir / f"{kind}.md"))


@pytest.mark.parametrize("kind", ["fifo", "socket", "zero"])
def test_a_listed_machine_file_that_is_no_regular_file(
    project: Path, env: dict[str, str], short_dir: Path, kind: str
) -> None:
    smllm_dir = project / ".smllm"
    name = f"{kind}.smllm.yaml"
    (smllm_dir / "config.toml").write_text(f'[machines]\nfiles = ["dev.smllm.yaml", "{name}"]\n')
    dict(_kinds(short_dir))[kind](smllm_dir / name)

    ran = run(["validate"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        f".smllm/config.toml:2:28: error: machines.files[1]: no machine file {name} (CFG-3)\n"
        "  hint: a machine file must be a regular file, not a folder, FIFO, socket or device\n"
        "1 error, 0 warnings, 0 info\n"
    )
    ran = run(["session", "new"], project, env)
    assert (ran.code, ran.err) == (0, NOT_CONFIGURED)
    assert "No state machines are configured." in ran.out
    ran = run(["fire", "enter", "--param", "stateMachine=dev"], project, env)
    assert (ran.code, ran.err) == (1, NOT_CONFIGURED)
    assert "error: enter param stateMachine " in ran.out  # refused: dev isn't configured
    # named on the command line, it is refused as well (not read: FMT-1)
    ran = run(["validate", f".smllm/{name}"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        f".smllm/{name}: error: can't read the file: not a regular file (FMT-1)\n"
        "  hint: check the path and that smllm may read it\n"
        "1 error, 0 warnings, 0 info\n"
    )


def test_a_session_config_that_became_a_fifo(project: Path, env: dict[str, str]) -> None:
    # a recorded config that is no regular file any more is skipped like a missing one
    ran = run(["session", "new", "--json"], project, env)
    assert ran.code == 0
    import json

    key = json.loads(ran.out)["session"]
    config = project / ".smllm" / "config.toml"
    config.unlink()
    os.mkfifo(config)
    ran = run(["session", "show", key], project.parent, env)
    assert (ran.code, ran.err) == (0, "")
    assert "No state machines are configured." in ran.out


def test_the_cache_never_opens_what_isnt_a_regular_file(tmp_path: Path) -> None:
    # the signature of a FIFO changed this instant holds no content, and checking it again
    # doesn't open it (both would block); run in a thread, so a regression fails, not hangs
    import threading

    from smllm.machine.configs import cache

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    built = cache.time.time_ns()
    result: list[object] = []

    def check() -> None:
        sig = cache._signature(str(fifo), built)
        result.extend([sig, cache._fresh([sig])])

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(HANG_S)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer: the reader returns
        pytest.fail("the cache opened a FIFO")
    assert result == [(str(fifo), 0, fifo.stat().st_mtime_ns, False), True]
    missing = cache._signature(str(tmp_path / "nope"), built)
    assert missing == (str(tmp_path / "nope"), None, None, False)
    assert cache._fresh([missing])
    (tmp_path / "nope").write_text("x")
    assert not cache._fresh([missing])  # created since: stale


@pytest.mark.parametrize("path", ["CLAUDE.md", ".mcp.json", "home/.claude.json"])
def test_harness_status_never_opens_a_fifo(path: str, project: Path, env: dict[str, str]) -> None:
    """A FIFO where a client's file should be (CLAUDE.md beside AGENTS.md, the project's
    .mcp.json, Claude's user file) reads as unreadable at once: opening it would wait for a
    writer that never comes."""
    import json

    (project / "AGENTS.md").write_text("# notes\n")
    user = path.startswith("home/")
    fifo = Path(env["HOME"]) / path.removeprefix("home/") if user else project / path
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    scope = ["--scope", "user"] if user else []
    ran = run(["harness", "status", "claude", *scope, "--json"], project, env)
    assert ran.code == 0, ran
    assert "unreadable" in [p["state"] for p in json.loads(ran.out)["parts"]], ran.out
