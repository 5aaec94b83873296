"""The store broker's life (store/broker.py), on the real test server: a dead broker whose
socket is left behind, and another version's, are replaced by the next stop, which reads
directly meanwhile; brokers started together leave one; an idle one leaves; the server
stopped ends the broker and the stop fails open as before, and started again the stops are
brokered again; an unreachable server fails open; the folder is private and no secret is on
a command line, in an environment or in a log. The client's reading of answers, in process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from helpers.hook_runs import block_text, held
from helpers.pgserver import PASSWORD, free_port
from helpers.store_brokers import (
    broker,
    clear,
    gone,
    is_broker,
    logged_pids,
    stop,
    traced_stop,
    warm,
)

from smllm.errors import StoreBusy, StoreError
from smllm.store.brokered import TAG, _answer, _Fallback, spawn

SECRETS = sorted({PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD)})


def test_a_dead_broker_is_replaced(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
    tmp_path: Path,
) -> None:
    """Killed hard, a broker leaves its socket behind: the next stop reads directly (the
    socket refuses) and starts another, which takes the socket's place."""
    held("claude", pg, env)
    out, pid, sock = warm(pg, env, runtime)
    os.kill(pid, signal.SIGKILL)
    gone(pid)
    assert sock.exists()  # left behind

    ran, names = traced_stop(pg, env, tmp_path / "a.txt")
    assert (ran.code, ran.out) == (0, out) and "psycopg" in names  # read directly
    new, again = broker(runtime, other_than=pid)
    assert again == sock
    clear(pg, env)
    ran, names = traced_stop(pg, env, tmp_path / "b.txt")
    assert (ran.code, ran.out) == (0, out) and "psycopg" not in names
    assert is_broker(new)


def test_another_versions_broker_gives_way(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
    tmp_path: Path,
) -> None:
    """A broker answering with another tag (another smllm's) is not believed: the stop reads
    directly and starts one of its own, which replaces it. A broker asked by another smllm
    answers with its own tag and leaves, so that smllm's broker can take its place."""
    held("claude", pg, env)
    out, pid, sock = warm(pg, env, runtime)
    os.kill(pid, signal.SIGTERM)
    gone(pid)
    assert not sock.exists()  # a broker that leaves removes its socket
    asked: list[bytes] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as old:
        old.bind(str(sock))
        old.listen()

        def answer() -> None:
            conn, _ = old.accept()
            with conn:
                asked.append(conn.recv(1 << 16))
                conn.sendall(b'{"tag":"0/0.0.1","rows":[]}\n')

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        ran, names = traced_stop(pg, env, tmp_path / "a.txt")
        thread.join(5)
    assert (ran.code, ran.out) == (0, out) and "psycopg" in names
    [request] = asked
    sent = json.loads(request)
    assert (sent["op"], sent["args"][0], sent["tag"]) == ("instance", "dev", TAG)
    new, _ = broker(runtime, other_than=pid)
    clear(pg, env)
    ran, names = traced_stop(pg, env, tmp_path / "b.txt")
    assert (ran.code, ran.out) == (0, out) and "psycopg" not in names

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(sock))
        client.sendall(b'{"tag":"0/9.9.9","op":"instance","args":["dev","x"]}\n')
        reply = json.loads(client.makefile("rb").readline())
    assert reply == {"tag": TAG, "fail": "another smllm"}
    gone(new)
    assert not sock.exists()
    log = next(runtime.glob("*.log")).read_text()
    assert "leaves after 1 reads: a stop of smllm '0/9.9.9' asked: it starts its own" in log


def test_brokers_started_together_leave_one(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
    pg_url: str,
    pg_namespace: str,
) -> None:
    """Stops that find no broker at the same moment each start one: one stays (the lock), the
    others leave; a store read in process then finds it answering."""
    from smllm.store.brokered import BrokeredStore, socket_path

    path = socket_path(pg_url, pg_namespace)
    assert path is not None and path.startswith(str(runtime))
    for pid in [spawn(path, pg_url, pg_namespace) for _ in range(3)]:
        os.waitpid(pid, 0)  # each forks its broker away at once
    pid, _ = broker(runtime)
    end = time.monotonic() + 15
    while len(running(path)) > 1:
        assert time.monotonic() < end, running(path)
        time.sleep(0.1)
    assert running(path) == [pid]
    store = BrokeredStore(pg_url, pg_namespace)
    assert store.instance("dev", "no-such-id") is None
    assert store.paused(["dev"], 5) == ([], 0)
    assert store._direct is None  # answered by the broker: no connection of its own


def running(path: str) -> list[int]:
    """The brokers running for socket `path`."""
    name = os.path.basename(path).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_broker(int(entry.name)):
            try:
                if name in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return sorted(found)


def test_an_idle_broker_leaves(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
) -> None:
    env["SMLLM_STORE_BROKER_IDLE"] = "1"
    held("claude", pg, env)
    _, pid, sock = warm(pg, env, runtime)
    gone(pid, within=10)
    assert not sock.exists()
    assert "leaves after 0 reads: idle for 1 s" in next(runtime.glob("*.log")).read_text()


@pytest.fixture
def stopped(pg_server: Any) -> Any:
    """The server; whatever the test did to it, it runs again afterwards."""
    yield pg_server
    if not pg_server.running():
        pg_server.restart()


def test_the_server_stopped_and_started_again(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
    stopped: Any,
    tmp_path: Path,
) -> None:
    """The server stops: its broker leaves with the connection, and the stop fails open as
    without brokers (exit 1, nothing on stdout). Started again, the stops are brokered again."""
    held("claude", pg, env)
    out, pid, sock = warm(pg, env, runtime)
    stopped.stop("fast")
    gone(pid)
    assert not sock.exists()
    down = f"error: the store at 127.0.0.1:{stopped.port} is unreachable: Connection refused\n"
    ran = stop(pg, env)
    assert (ran.code, ran.out, ran.err) == (1, "", down)

    stopped.restart()
    # read directly, or by the broker the failed stop started, if it connected after the start
    assert stop(pg, env).out == out
    broker(runtime, other_than=pid)
    clear(pg, env)
    ran, names = traced_stop(pg, env, tmp_path / "b.txt")
    assert (ran.code, ran.out) == (0, out) and "psycopg" not in names


def test_an_unreachable_server_fails_open(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
    pg_server: Any,
) -> None:
    """The URL turned to a port where no server listens: the stop fails open, as ever; the
    broker it started couldn't connect, said so in its log (no password in it) and left."""
    held("claude", pg, env)
    closed = free_port()
    env["SMLLM_TEST_PG"] = pg_server.url().replace(f":{pg_server.port}/", f":{closed}/")
    ran = stop(pg, env)
    down = f"error: the store at 127.0.0.1:{closed} is unreachable: Connection refused\n"
    assert (ran.code, ran.out, ran.err) == (1, "", down)
    end = time.monotonic() + 20
    while "leaves" not in (log := next(runtime.glob("*.log")).read_text()):
        assert time.monotonic() < end, log
        time.sleep(0.05)
    assert f"leaves: {down[len('error: ') :]}" in log
    assert not list(runtime.glob("*.sock"))
    for pid in logged_pids(runtime):
        gone(pid)
    assert all(secret not in log for secret in SECRETS)


def test_the_broker_keeps_its_secrets(
    pg: Path,
    env: dict[str, str],
    runtime: Path,
    pg_url: str,
    tmp_path: Path,
) -> None:
    """The folder is the user's alone (0700), as are the socket and the log; names are hashes;
    the password is on no command line, in no environment and in no log. A folder opened to
    others isn't trusted: the stop reads directly, and the broker it starts closes it again."""
    key = held("claude", pg, env)
    out, pid, _ = warm(pg, env, runtime)
    assert json.loads(out)["reason"] == block_text(key)
    assert runtime.stat().st_mode & 0o777 == 0o700
    for path in runtime.iterdir():
        assert re.fullmatch(r"[0-9a-f]{32}\.(sock|log)", path.name), path.name
        assert path.stat().st_mode & 0o077 == 0, path
    secrets = [*SECRETS, pg_url]
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    environ = Path(f"/proc/{pid}/environ").read_bytes().decode()
    log = next(runtime.glob("*.log")).read_text()
    assert "smllm.store.broker" in cmdline and "XDG_RUNTIME_DIR" in environ and "starts" in log
    for text in (cmdline, environ, log):
        assert not [s for s in secrets if s in text]

    runtime.chmod(0o755)
    ran, names = traced_stop(pg, env, tmp_path / "a.txt")
    assert (ran.code, ran.out) == (0, out) and "psycopg" in names
    end = time.monotonic() + 20
    while runtime.stat().st_mode & 0o777 != 0o700:
        assert time.monotonic() < end
        time.sleep(0.05)
    clear(pg, env)
    ran, names = traced_stop(pg, env, tmp_path / "b.txt")
    assert (ran.code, ran.out) == (0, out) and "psycopg" not in names
    assert is_broker(pid)  # the first broker still serves: the second one left


# -- the client's reading of an answer -------------------------------------------------------------


def _tagged(**fields: Any) -> bytes:
    return (json.dumps({"tag": TAG, **fields}) + "\n").encode()


def test_the_client_reads_an_answer() -> None:
    assert _answer(_tagged(rows=[["{}"]])) == ([["{}"]], 0)
    assert _answer(_tagged(rows=[], total=3)) == ([], 3)
    with pytest.raises(StoreError, match=r"^the store at h is unreachable: x$"):
        _answer(_tagged(error="the store at h is unreachable: x", busy=False))
    with pytest.raises(StoreBusy):
        _answer(_tagged(error="the store is busy", busy=True))
    # not a broker of ours, or another version's: read directly and start ours
    for reply in (b"", b"garbage\n", b'{"tag":"0/0","rows":[]}\n', b"[1]\n", b"\xff\n"):
        with pytest.raises(_Fallback) as caught:
            _answer(reply)
        assert caught.value.start, reply
    # ours, but nothing that can be read: read directly, and leave it be
    for reply in (_tagged(rows=[[1]]), _tagged(rows="x"), _tagged(fail="not a request")):
        with pytest.raises(_Fallback) as caught:
            _answer(reply)
        assert not caught.value.start, reply
