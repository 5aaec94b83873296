"""One call at a time per session (engine.md §10, issue 8 defect 1).

Calls of one session used to race: both ran their guards, one committed the instance and then
lost the session write, and callers were told "refused" for an event that was written. Now a
call of a session that has a call in flight is refused up front (`error: session KEY is busy
…`, exit 1) before any guard runs, and writes nothing. These tests check, with real processes
and in-process, that every exit code tells the truth about what was written, that the instance
always agrees with its session, and that a killed call never locks its session.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm, write_machine

TOGGLE = """\
id: toggle
description: A two-state toggle.
initial: LOW
meta:
  smllm: 1
  events:
    flip: { description: Flip it. }
    slow: { description: Flip it after the guard's gate opens. }
states:
  LOW:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Low. Fire flip." } }
    on:
      flip: HIGH
      slow:
        - target: HIGH
          guard:
            type: command
            params: { run: 'touch "$GATE.started"; until [ -e "$GATE" ]; do sleep 0.02; done' }
        - target: LOW
  HIGH:
    entry: { type: prompt, params: { text: "High. Fire flip." } }
    on: { flip: LOW }
"""

BUSY = "error: session {key} is busy with another call; wait for its reply, then fire again\n"


@pytest.fixture
def toggle(tmp_path: Path, env: dict[str, str]) -> Path:
    folder = tmp_path / "toggle"
    write_machine(folder, "toggle", TOGGLE)
    return folder


def entered(folder: Path, env: dict[str, str]) -> str:
    ran = smllm(["fire", "enter", "--param", "stateMachine=toggle", "--json"], folder, env)
    assert ran.code == 0, ran.err
    key: str = json.loads(ran.out)["session"]
    return key


def store_rows(folder: Path, env: dict[str, str], key: str) -> dict[str, Any]:
    """Everything the stores hold about the session and its one instance."""
    db = sqlite3.connect(folder / ".smllm" / "state" / "smllm.db")
    user = sqlite3.connect(Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db")
    try:
        [(data,)] = db.execute("SELECT data FROM instances").fetchall()
        history = [json.loads(r[0]) for r in db.execute("SELECT data FROM history ORDER BY seq")]
        [(sdata,)] = user.execute("SELECT data FROM sessions WHERE key = ?", (key,)).fetchall()
        audit = [r[0] for r in user.execute("SELECT kind FROM audit WHERE session = ?", (key,))]
    finally:
        db.close()
        user.close()
    return {
        "instance": json.loads(data),
        "history": history,
        "session": json.loads(sdata),
        "audit": audit,
    }


def test_six_shells_flipping_one_session(toggle: Path, env: dict[str, str]) -> None:
    """The issue's reproduction: six shells, ten flips each, on one session. Every exit 0 is
    one history record, every exit 1 is the busy error and wrote nothing, and the session still
    holds its active instance."""
    key = entered(toggle, env)
    script = (
        "for j in 1 2 3 4 5 6; do (for i in 1 2 3 4 5 6 7 8 9 10; do "
        '"$PY" -m smllm fire --session "$KEY" flip >"$OUT/$j.$i.out" 2>"$OUT/$j.$i.err"; '
        'echo $? >"$OUT/$j.$i.code"; done) & done; wait'
    )
    out = toggle / "out"
    out.mkdir()
    subprocess.run(
        ["bash", "-c", script],
        env={**env, "PY": sys.executable, "KEY": key, "OUT": str(out)},
        cwd=toggle,
        check=True,
        timeout=300,
    )
    codes = {p.stem: int(p.read_text()) for p in out.glob("*.code")}
    assert len(codes) == 60
    accepted = [name for name, code in codes.items() if code == 0]
    refused = [name for name, code in codes.items() if code != 0]
    for name in refused:
        assert codes[name] == 1
        assert (out / f"{name}.err").read_text() == BUSY.format(key=key)
        assert (out / f"{name}.out").read_text() == ""
    for name in accepted:
        text = (out / f"{name}.out").read_text()
        assert "\nArrived by: flip from " in text and (out / f"{name}.err").read_text() == ""
    rows = store_rows(toggle, env, key)
    flips = [h for h in rows["history"] if h["event"] == "flip"]
    assert len(flips) == len(accepted) >= 1
    inst = rows["instance"]
    assert inst["version"] == 1 + len(accepted)
    assert inst["status"] == "active" and inst["holder"] == key
    assert inst["state"] == ("LOW" if len(accepted) % 2 == 0 else "HIGH")
    assert rows["session"]["holding"] == {"machine": "toggle", "id": inst["id"]}
    assert rows["audit"].count("event") == 1 + len(accepted)
    # versions in history are 1..V, in order: a serial history
    assert [h["version"] for h in rows["history"]] == list(range(1, inst["version"] + 1))


def start_slow(folder: Path, env: dict[str, str], key: str, gate: Path) -> subprocess.Popen[str]:
    """`fire slow` in a new process group, its guard waiting for `gate` to exist."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "smllm", "fire", "--session", key, "slow"],
        cwd=folder,
        env={**env, "GATE": str(gate)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not Path(f"{gate}.started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the guard never started"
        time.sleep(0.02)
    return proc


def in_flight(
    folder: Path, env: dict[str, str], tmp_path: Path
) -> tuple[str, dict[str, Any], Path, subprocess.Popen[str]]:
    """A session with its `slow` call in flight: the key, the stores before, the guard's
    gate and the process."""
    key = entered(folder, env)
    before = store_rows(folder, env, key)
    gate = tmp_path / "gate"
    return key, before, gate, start_slow(folder, env, key, gate)


def test_a_call_in_flight_refuses_the_next_and_changes_nothing(
    toggle: Path, env: dict[str, str], tmp_path: Path
) -> None:
    key, before, gate, proc = in_flight(toggle, env, tmp_path)
    try:
        ran = smllm(["fire", "--session", key, "flip"], toggle, env)
        assert (ran.code, ran.out, ran.err) == (1, "", BUSY.format(key=key))
        ran = smllm(["fire", "--session", key, "flip", "--json"], toggle, env)
        assert ran.code == 1 and json.loads(ran.out)["ok"] is False
        assert store_rows(toggle, env, key) == before
        # a view reads without the lock
        assert smllm(["session", "show", key], toggle, env).code == 0
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Arrived by: slow from LOW" in out
    after = store_rows(toggle, env, key)
    assert after["instance"]["version"] == 2 and after["instance"]["state"] == "HIGH"


def test_a_killed_call_does_not_lock_its_session(
    toggle: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """`kill -9` mid-call (its guard running): nothing was written, and the next call works."""
    key, before, gate, proc = in_flight(toggle, env, tmp_path)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    gate.touch()  # a kill -9 can't end the guard (its own group): let it finish
    assert store_rows(toggle, env, key) == before
    ran = smllm(["fire", "--session", key, "flip"], toggle, env)
    assert ran.code == 0, ran.err
    assert "Arrived by: flip from LOW" in ran.out


def test_in_process_calls_of_one_session_exclude_each_other(
    toggle: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `App`s in one process (two threads): the second call is SessionBusy, with the
    stores unchanged; once the first returns, the session takes calls again."""
    from smllm.api.app import App
    from smllm.errors import SessionBusy

    key = entered(toggle, env)
    gate = tmp_path / "gate"
    monkeypatch.setenv("GATE", str(gate))
    monkeypatch.chdir(toggle)
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(App().fire(key, "slow")))
    first.start()
    try:
        deadline = time.monotonic() + 30
        while not Path(f"{gate}.started").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        before = store_rows(toggle, env, key)
        with pytest.raises(SessionBusy) as caught:
            App().fire(key, "flip")
        assert str(caught.value) == BUSY.format(key=key)[len("error: ") : -1]
        assert store_rows(toggle, env, key) == before
    finally:
        gate.touch()
        first.join(timeout=60)
    [result] = results
    assert result.ok and "Arrived by: slow from LOW" in result.text()
    assert App().fire(key, "flip").ok


def test_a_session_lost_by_a_crash_takes_its_instance_back(
    toggle: Path, env: dict[str, str]
) -> None:
    """engine.md §10: the user store may lose its last commit (a crash between the instance
    and the session commits, or power loss under synchronous=NORMAL). The instance is the
    truth: a view shows the session holding it, and the next call writes that first."""
    key = entered(toggle, env)
    ran = smllm(["fire", "--session", key, "flip"], toggle, env)
    assert ran.code == 0
    # the session write of that flip never happened: the session rests in idle
    user = sqlite3.connect(Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db")
    with user:
        [(data,)] = user.execute("SELECT data FROM sessions WHERE key = ?", (key,)).fetchall()
        user.execute(
            "UPDATE sessions SET data = ? WHERE key = ?",
            (json.dumps({**json.loads(data), "holding": None}), key),
        )
    user.close()
    before = store_rows(toggle, env, key)
    shown = smllm(["session", "show", key], toggle, env)
    assert shown.code == 0
    assert shown.out.splitlines()[1].startswith(f"session {key} · toggle › HIGH · instance i-")
    # the status line too (it reads the machines' summary, not the App)
    status = smllm(["statusline", "--session", key, "--color", "never"], toggle, env)
    assert status.out.startswith("smllm toggle › HIGH · instance i-"), status
    assert store_rows(toggle, env, key) == before  # a view never writes
    ran = smllm(["fire", "--session", key, "flip"], toggle, env)
    assert ran.code == 0, ran.out + ran.err
    assert "Arrived by: flip from HIGH" in ran.out
    rows = store_rows(toggle, env, key)
    assert rows["session"]["holding"] == {"machine": "toggle", "id": rows["instance"]["id"]}
    assert rows["audit"][-2:] == ["moved", "event"]
    audit = smllm(["session", "show", key, "--audit"], toggle, env).out.splitlines()
    assert audit[-2].endswith(
        "moved  instance " + rows["instance"]["id"] + " is held again: a call ended between "
        "saving the instance and the session"
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_that_ends_fire_ends_its_commands(
    toggle: Path, env: dict[str, str], tmp_path: Path, signum: int
) -> None:
    """SIGTERM, SIGHUP and SIGINT to `smllm fire` while its guard runs: the guard's whole
    process group ends with it, nothing is written, and the session takes calls again."""
    key, before, gate, proc = in_flight(toggle, env, tmp_path)
    # the guard's group: the one process group under smllm's whose leader runs the guard
    guards = [
        int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _parent(int(pid)) == proc.pid
    ]
    assert len(guards) == 1, guards
    group = os.getpgid(guards[0])
    assert group != proc.pid  # the guard has its own group, which smllm must end
    try:
        os.kill(proc.pid, signum)
        proc.communicate(timeout=30)
        assert proc.returncode in (-signum, 2), proc.returncode
        deadline = time.monotonic() + 10
        while _group_alive(group):
            assert time.monotonic() < deadline, "the guard's process group outlived smllm"
            time.sleep(0.02)
    finally:
        gate.touch()  # a guard that outlived smllm (the failure above) ends anyway
    assert store_rows(toggle, env, key) == before
    ran = smllm(["fire", "--session", key, "flip"], toggle, env)
    assert ran.code == 0, ran.err


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    # a zombie leader still counts for killpg: look for a live member instead
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[3]) == group and stat[0] != "Z":
                return True
    return False


@pytest.mark.parametrize(
    "key", ["../../escape", "a/b", "..", ".", "", "k\x00ey", "ke y", "é", "\udcff", "A" * 300]
)
def test_a_lock_file_never_leaves_the_calls_folder(tmp_path: Path, key: str) -> None:
    """A session key names its lock file only when it is plain (letters, digits, - and _, at
    most 128): any other text, a library caller's, is hashed: the file stays in STATE/calls,
    its name is never too long, and two keys never share a file."""
    import hashlib

    from smllm.api.calllock import CallLock

    folder = tmp_path / "state"
    lock = CallLock(str(folder), key)
    name = Path(lock.path).name
    assert Path(lock.path).parent == folder / "calls"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    assert name == f"~{digest}.lock"
    assert lock.acquire()
    assert [p.name for p in (folder / "calls").iterdir()] == [name]
    lock.release()
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("key", ["s-Ab_9", "B" * 128])
def test_a_plain_key_names_its_lock_file(tmp_path: Path, key: str) -> None:
    from smllm.api.calllock import CallLock

    lock = CallLock(str(tmp_path), key)
    assert lock.path == str(tmp_path / "calls" / f"{key}.lock")
    assert lock.acquire()
    assert not CallLock(str(tmp_path), key).acquire()  # the same key: the same lock
    lock.release()


def test_the_hooks_fail_open_while_a_call_is_in_flight(
    toggle: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A stop while a call of the session runs (a fire in a background shell) is allowed and
    writes nothing; a prompt then writes nothing either: that call's reply decides."""
    from helpers.hook_runs import hook, payload, start

    key = start("claude", "h1", toggle, env)
    ran = smllm(["fire", "--session", key, "enter", "--param", "stateMachine=toggle"], toggle, env)
    assert ran.code == 0, ran.err
    stop = payload("claude", "h1", toggle, stop_hook_active=False)
    blocked = hook("claude", "stop", stop, toggle, env)
    assert blocked.code == 0 and json.loads(blocked.out)["decision"] == "block", blocked
    before = store_rows(toggle, env, key)
    gate = tmp_path / "gate"
    proc = start_slow(toggle, env, key, gate)
    try:
        for _ in range(2):
            assert hook("claude", "stop", stop, toggle, env) == (0, "{}\n", "")
        prompt = payload("claude", "h1", toggle, prompt="go on")
        assert hook("claude", "user-prompt-submit", prompt, toggle, env) == (0, "{}\n", "")
        assert store_rows(toggle, env, key) == before
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Arrived by: slow from LOW" in out  # the call in flight's reply decides
