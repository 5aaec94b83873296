"""The stop hook of a PostgreSQL project reads through the store's broker (issue 20 §7,
store/brokered.py and store/broker.py), on the real test server: a brokered stop answers
byte for byte as a direct one and imports no psycopg; a takeover or a pause from another host
is seen by the very next stop; commands and the other hooks start no broker; a socket path
too long for the kernel means reading directly. The broker's life (dead, stale, idle, another
version's, the server down, its secrets): test_store_pg_broker_life.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Ran, smllm, use_postgres
from test_hook_imports import loaded, slow
from test_hooks import block_text, held, hook, payload

from smllm.store.brokered import ENV_IDLE, ENV_SWITCH

#: how long a test waits for a broker to come or go (it takes well under a second)
WAIT = 20.0


@pytest.fixture
def runtime(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
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


@pytest.fixture
def pg(
    project: Path,
    env: dict[str, str],
    pg_url: str,
    pg_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    runtime: Path,
) -> Path:
    """The example project on the test server (url-env), its brokers in `runtime`."""
    use_postgres(project, pg_url, pg_namespace, env, monkeypatch)
    return project


# -- helpers (test_store_pg_broker_life.py uses them too) -----------------------------------------


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
    """A stop, and the modules its process imported (test_hook_imports.loaded)."""
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


# -- the tests -----------------------------------------------------------------------------------


def test_a_brokered_stop_answers_as_a_direct_one(
    pg: Path, env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    key = held("claude", pg, env)
    assert not runtime.exists()  # session start and fire read directly: no broker
    direct = stop(pg, {**env, ENV_SWITCH: "0"})  # brokers off: today's path
    assert (direct.code, direct.err) == (0, ""), direct
    assert json.loads(direct.out)["reason"] == block_text(key)
    assert not runtime.exists()
    clear(pg, env)

    out, pid, _ = warm(pg, env, runtime)  # no broker yet: read directly, one started
    assert out == direct.out
    ran, names = traced_stop(pg, env, tmp_path / "m.txt")

    assert (ran.code, ran.out, ran.err) == (0, direct.out, "")
    assert "smllm.store.brokered" in names  # the test can fail
    assert not {"psycopg", "smllm.store.postgres", "smllm.store.broker"} & names
    assert not {"socket", "hashlib", "_hashlib"} & names  # _socket and _blake2 alone
    assert is_broker(pid)
    clear(pg, env)
    body = json.dumps(payload("claude", "h1", pg, stop_hook_active=False))
    assert slow(["harness", "hook", "claude", "stop"], pg, env, tmp_path, stdin=body) == []

    # a yielded session's stop reads its holder through the broker too
    assert smllm(["fire", "--session", key, "yield"], pg, env).code == 0
    ran, names = traced_stop(pg, env, tmp_path / "y.txt")
    assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    assert "psycopg" not in names
    # and the other hooks read directly, as before
    ran = hook("claude", "session-start", payload("claude", "h1", pg), pg, env)
    assert ran.code == 0 and "dev › PLAN · issue GH-1" in ran.out, ran
    assert logged_pids(runtime) == [pid]


def other_host(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The environment of another machine on the same store: its own user store and caches."""
    other = tmp_path / "other-host"
    return {
        **env,
        "XDG_STATE_HOME": str(other / "state"),
        "XDG_CACHE_HOME": str(other / "cache"),
        "XDG_RUNTIME_DIR": str(other / "run"),
        "HOME": str(other / "home"),
    }


@pytest.mark.parametrize("change", ["takeover", "pause"])
def test_another_hosts_change_is_seen_by_the_next_stop(
    pg: Path, env: dict[str, str], runtime: Path, tmp_path: Path, change: str
) -> None:
    """Another host's session takes the issue over (and pauses it): the very next stop here,
    answered by a broker that has served stops before, says so; its reads (the instance, then
    the paused list of the idle block) all went through the broker."""
    held("claude", pg, env)
    before, pid, _ = warm(pg, env, runtime)
    ran, names = traced_stop(pg, env, tmp_path / "warm.txt")
    assert ran.out == before and "psycopg" not in names
    clear(pg, env)

    there = other_host(env, tmp_path)
    enter = ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-1", "--json"]
    ran = smllm(enter, pg, there)
    assert ran.code == 0, ran
    other = json.loads(ran.out)["session"]
    message = f"issue GH-1 moved to session {other}; you are in idle"
    if change == "pause":
        assert smllm(["fire", "--session", other, "pause"], pg, there).code == 0
        message = "issue GH-1 is paused; you are in idle"

    ran, names = traced_stop(pg, env, tmp_path / "next.txt")

    assert ran.code == 0, ran
    reason = json.loads(ran.out)["reason"]
    assert message in reason, reason
    if change == "pause":
        assert "GH-1" in reason.split(message, 1)[1]  # listed among the paused
    assert "psycopg" not in names  # the broker answered, with the rows as they are now
    assert stop(pg, env).out == "{}\n"  # in idle now
    assert is_broker(pid)


def test_a_socket_path_too_long_means_reading_directly(
    pg: Path, env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    """A runtime folder so deep that the socket's path would pass 103 bytes: no broker, the
    stop reads directly and answers as ever."""
    deep = runtime.parent / ("d" * 100)
    deep.mkdir()
    env["XDG_RUNTIME_DIR"] = str(deep)
    key = held("claude", pg, env)
    ran, names = traced_stop(pg, env, tmp_path / "m.txt")
    assert json.loads(ran.out)["reason"] == block_text(key)
    assert "psycopg" in names
    assert not (deep / "smllm").exists()


def test_only_a_stop_opens_brokered_stores(pg_url: str, pg_namespace: str) -> None:
    """`brokered()` is the stop's alone: outside it (commands, smllm mcp, the library) a
    PostgreSQL store is read directly."""
    from smllm.api.stores import brokered, open_store
    from smllm.machine.summary import StoreSpec
    from smllm.store.brokered import BrokeredStore
    from smllm.store.postgres import PostgresStore

    spec = StoreSpec("url", pg_url, pg_namespace)
    stores: list[Any] = [open_store(spec)]
    with brokered():
        stores.append(open_store(spec))
        with brokered():
            stores.append(open_store(spec))
        stores.append(open_store(spec))
    stores.append(open_store(spec))
    assert [type(s) for s in stores] == [PostgresStore, *[BrokeredStore] * 3, PostgresStore]
    assert (
        stores[1].name
        == stores[0].name
        == f"the store at {stores[0].host} (namespace " + (f"{pg_namespace})")
    )
