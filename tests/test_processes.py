"""Tests for run_command, with real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smllm.api import processes
from smllm.api.processes import CommandResult, run_command

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/home/someone"}


def run(cmd: str | list[str], cwd: str = "/", timeout: float = 10.0) -> CommandResult:
    return run_command(cmd, cwd=cwd, env=ENV, timeout=timeout, timeout_text=f"{timeout:g}")


def timed(cmd: str | list[str], timeout: float = 10.0) -> tuple[CommandResult, float]:
    start = time.monotonic()
    result = run(cmd, timeout=timeout)
    return result, time.monotonic() - start


def alive(pid: int) -> bool:
    """Running, that is: a killed orphan may linger as a zombie if init is slow to reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_gone(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    """Where a command writes background pids; whatever is still running gets killed."""
    path = tmp_path / "pids"
    yield path
    if path.exists():
        for pid in map(int, path.read_text().split()):
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_exit_zero() -> None:
    assert run("echo ignored; exit 0") == CommandResult(True, "")


def test_exit_nonzero_without_output() -> None:
    assert run("exit 3") == CommandResult(False, "exited 3")


def test_exit_nonzero_with_output_keeps_stderr_and_newlines() -> None:
    result = run("echo one; echo two >&2; printf 'three  \\n\\n'; exit 3")
    assert result == CommandResult(False, "exited 3: one\ntwo\nthree")


def test_tail_is_last_400_characters_right_stripped() -> None:
    result = run(
        "printf 'a%.0s' $(seq 500); printf 'b%.0s' $(seq 300); printf ' \\n\\t\\n'; exit 2"
    )
    assert result.detail == "exited 2: " + "a" * 100 + "b" * 300


def test_bad_utf8_is_replaced() -> None:
    assert run(r"printf 'caf\303\251 \377!'; exit 1").detail == "exited 1: café \ufffd!"


def test_whitespace_only_output_counts_as_none() -> None:
    assert run("printf ' \\n\\n'; exit 4").detail == "exited 4"


def test_timeout_kills_the_whole_process_group(pidfile: Path) -> None:
    result, took = timed(f"sleep 30 & echo $! > {pidfile}; sleep 30", timeout=0.5)
    assert result == CommandResult(False, "timed out after 0.5s")
    assert 0.4 < took < 1.5
    grandchild = int(pidfile.read_text())
    assert wait_gone(grandchild)


def test_timeout_text_is_used_as_written() -> None:
    result = run_command("sleep 30", cwd="/", env=ENV, timeout=0.2, timeout_text="0.20")
    assert result.detail == "timed out after 0.20s"


def test_success_does_not_wait_for_background_grandchild(pidfile: Path) -> None:
    result, took = timed(f"sleep 30 & echo $! > {pidfile}; exit 0")
    assert result == CommandResult(True, "")
    assert took < 0.5


def test_failure_waits_briefly_for_background_grandchild(pidfile: Path) -> None:
    result, took = timed(f"sleep 30 & echo $! > {pidfile}; echo bye; exit 1")
    assert result == CommandResult(False, "exited 1: bye")
    assert took < 0.6


def test_killed_by_a_signal() -> None:
    assert run("kill -9 $$") == CommandResult(False, "killed by a signal")


def test_missing_executable() -> None:
    result = run(["nosuchcmd-smllm", "x"])
    assert result == CommandResult(
        False, "could not start: No such file or directory: 'nosuchcmd-smllm'"
    )


def test_missing_cwd(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = run("true", cwd=str(missing))
    assert result == CommandResult(
        False, f"could not start: No such file or directory: '{missing}'"
    )


def test_empty_argv_and_nul_byte_do_not_raise() -> None:
    assert run([]) == CommandResult(False, "could not start: empty command")
    assert run("echo \0").detail.startswith("could not start: ")


def test_list_form_uses_no_shell() -> None:
    # $0 of the inner shell is the literal list item: nothing expanded it on the way in.
    result = run(["sh", "-c", 'printf %s "$0"; exit 1', "$HOME"])
    assert result == CommandResult(False, "exited 1: $HOME")


def test_list_form_looks_up_path_from_env(tmp_path: Path) -> None:
    script = tmp_path / "only-here"
    script.write_text("#!/bin/sh\necho found; exit 5\n")
    script.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    result = run_command(["only-here"], cwd="/", env=env, timeout=5, timeout_text="5")
    assert result == CommandResult(False, "exited 5: found")


def test_env_is_exactly_the_given_mapping() -> None:
    env = {"PATH": "/usr/bin:/bin", "SMLLM_PARAM_X": "hello world"}
    result = run_command(
        'printf "%s|%s" "$SMLLM_PARAM_X" "${HOME-unset}"; exit 1',
        cwd="/",
        env=env,
        timeout=5,
        timeout_text="5",
    )
    assert result == CommandResult(False, "exited 1: hello world|unset")


def test_stdin_is_empty() -> None:
    assert run("cat; exit 1") == CommandResult(False, "exited 1")


def test_cwd_is_used(tmp_path: Path) -> None:
    assert run("pwd; exit 1", cwd=str(tmp_path)).detail == f"exited 1: {tmp_path}"


def test_huge_output_is_bounded() -> None:
    tracemalloc.start()
    try:
        result, took = timed("yes | head -c 50000000; exit 1")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 50 MB of "y\n", minus the final newline, ends in 400 characters of "\ny\ny...y".
    assert result.detail == "exited 1: " + "\ny" * 200
    assert peak < 1_000_000
    assert took < 5


def test_works_without_pidfd(monkeypatch: pytest.MonkeyPatch, pidfile: Path) -> None:
    # Older kernels: fall back to polling the child between reads.
    monkeypatch.setattr(processes, "_open_pidfd", lambda pid: None)
    assert run("echo out; exit 2") == CommandResult(False, "exited 2: out")
    result, took = timed(f"sleep 30 & echo $! > {pidfile}; exit 0")
    assert result == CommandResult(True, "")
    assert took < 0.5
    result, took = timed("sleep 30", timeout=0.3)
    assert result == CommandResult(False, "timed out after 0.3s")
    assert took < 1.0


@pytest.mark.parametrize(
    ("param", "env"),
    [
        ("issueId", "ISSUE_ID"),
        ("prURL", "PR_URL"),
        ("prURLText", "PR_URL_TEXT"),
        ("a1B", "A1_B"),
        ("files", "FILES"),
        ("x.y-z", "X_Y_Z"),
        ("ABc", "A_BC"),
    ],
)
def test_param_environment_names(param: str, env: str) -> None:
    # machine-format.md §4; env_name uses str methods, not re: it runs on the hook path
    from smllm.machine.loader.params import env_name

    assert env_name(param) == env


@settings(max_examples=500, derandomize=True, database=None)
@given(st.text(alphabet="aAbBzZ09_-.éßİ", max_size=12))
def test_param_environment_names_match_the_regex_rule(param: str) -> None:
    import re

    from smllm.machine.loader.params import env_name

    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", param)
    assert env_name(param) == re.sub(r"[^A-Z0-9_]", "_", spaced.upper())


def test_a_signal_on_another_thread_wakes_the_wait(tmp_path: Path) -> None:
    """Ctrl-C while a command runs ends the wait at once, even when the signal's C handler
    runs on another thread (or just before select() blocks): the main thread would otherwise
    sleep in select() until the command's next output or its exit."""
    import threading

    started = tmp_path / "started"

    def interrupt() -> None:
        deadline = time.monotonic() + 10
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the main thread is in select() by now
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    helper = threading.Thread(target=interrupt)
    helper.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run(f"touch {started}; sleep 8", timeout=30)
    finally:
        helper.join()
    assert time.monotonic() - t0 < 4


def test_the_wakeup_fd_is_given_back_with_the_signals_it_missed() -> None:
    """A wakeup fd set before (an asyncio loop's) is restored after the command, and gets
    the numbers of the signals that came while the command ran."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    before = signal.signal(signal.SIGUSR1, lambda *_: None)
    previous = signal.set_wakeup_fd(write_fd)
    try:
        assert run(f"kill -USR1 {os.getpid()}; sleep 0.2") == CommandResult(True, "")
        assert signal.set_wakeup_fd(write_fd) == write_fd
        assert os.read(read_fd, 16) == bytes([signal.SIGUSR1])
    finally:
        signal.set_wakeup_fd(previous)
        signal.signal(signal.SIGUSR1, before)
        os.close(read_fd)
        os.close(write_fd)
