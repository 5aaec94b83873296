"""The store broker of a PostgreSQL project, seen from outside (test_store_pg_broker.py and
test_store_pg_broker_life.py): a private runtime folder for the brokers, stops and prompts
through the real hook, the brokers that logged in the folder, waiting for one to listen or to
be gone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import Ran
from helpers.hook_runs import hook, payload
from helpers.imported_modules import loaded

from smllm.store.brokered import ENV_IDLE

#: how long a test waits for a broker to come or go (it takes well under a second)
WAIT = 20.0


@contextmanager
def broker_runtime(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The brokers' folder, in an XDG_RUNTIME_DIR of the test's own: a short path, as a socket
    needs (pytest's tmp paths are too long for one). Every broker that logged there is ended
    after the test; one a failed test leaves idles out after a minute anyway."""
    base = Path(tempfile.mkdtemp(prefix="smllm-rt-"))
    for name, value in (("XDG_RUNTIME_DIR", str(base)), (ENV_IDLE, "60")):
        env[name] = value
        monkeypatch.setenv(name, value)
    folder = base / "smllm"
    yield folder
    for pid in logged_pids(folder):
        if is_broker(pid):
            os.kill(pid, signal.SIGTERM)
            gone(pid)
    shutil.rmtree(base, ignore_errors=True)


def stop(project: Path, env: dict[str, str], host: str = "h1") -> Ran:
    body = payload("claude", host, project, stop_hook_active=False)
    return hook("claude", "stop", body, project, env)


def clear(project: Path, env: dict[str, str], host: str = "h1") -> None:
    """A user prompt: the session's blocks cleared, so that the next stop blocks again."""
    body = payload("claude", host, project, prompt="go on")
    assert hook("claude", "user-prompt-submit", body, project, env).code == 0


def traced_stop(
    project: Path, env: dict[str, str], out: Path, host: str = "h1"
) -> tuple[Ran, set[str]]:
    """A stop, and the modules its process imported (imported_modules.loaded)."""
    body = json.dumps(payload("claude", host, project, stop_hook_active=False))
    return loaded(["harness", "hook", "claude", "stop"], project, env, out, stdin=body)


def logged_pids(folder: Path) -> list[int]:
    """The pids the brokers' logs in `folder` name (each log begins with its broker's start)."""
    pids = []
    for log in sorted(folder.glob("*.log")) if folder.exists() else []:
        words = log.read_text().split()
        if len(words) > 2 and words[1] == "broker":
            pids.append(int(words[2]))
    return pids


def is_broker(pid: int) -> bool:
    """Whether `pid` is a broker still running (not a zombie, not gone)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return b"smllm.store.broker" in cmdline and state != "Z"


def gone(pid: int, within: float = WAIT) -> None:
    end = time.monotonic() + within
    while is_broker(pid):
        assert time.monotonic() < end, f"broker {pid} still runs after {within:g} s"
        time.sleep(0.05)


def answers(path: Path) -> bool:
    """Whether a broker listens at `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def broker(folder: Path, other_than: int | None = None) -> tuple[int, Path]:
    """The running broker of the test's one store (one other than `other_than`), once it
    listens: its pid and socket."""
    end = time.monotonic() + WAIT
    while True:
        pids = [p for p in logged_pids(folder) if p != other_than and is_broker(p)]
        socks = list(folder.glob("*.sock")) if folder.exists() else []
        if len(pids) == 1 and len(socks) == 1 and answers(socks[0]):
            return pids[0], socks[0]
        assert time.monotonic() < end, f"no broker in {folder}: {pids}, {socks}"
        time.sleep(0.05)


def warm(project: Path, env: dict[str, str], folder: Path) -> tuple[str, int, Path]:
    """A stop that finds no broker (read directly, one started): its answer, and the broker."""
    first = stop(project, env)
    assert first.code == 0 and first.out.startswith('{"decision":"block"'), first
    pid, sock = broker(folder)
    clear(project, env)
    return first.out, pid, sock
