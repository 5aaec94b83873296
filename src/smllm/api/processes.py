"""Run a state machine's guard or action command (POSIX; Linux is the target).

The child gets its own process group so a timeout can kill everything it started.  Output
(stdout and stderr on one pipe) is kept only as a bounded rolling tail, and only reported
for failures.  A single thread multiplexes the pipe and the child's exit (a pidfd where
the kernel has one), so a success returns the moment the child exits even when a
background grandchild still holds the pipe open.

run_capturing runs an argv list the same way but reports the exit status and the output (a
bounded head and tail) however it ended: `smllm run`'s shell work tool.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time

from ..engine.host import CommandResult
from ..recordclass import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, TypeVar

    _T = TypeVar("_T")

__all__ = ["CommandOutput", "CommandResult", "run_capturing", "run_command"]

# Bytes of output kept; comfortably more than TAIL_CHARS even for 4-byte UTF-8 characters.
_KEEP_BYTES = 4096
TAIL_CHARS = 400
# After a failure, how long to let the output pipe drain once the child has exited.
_DRAIN_SECONDS = 0.2
# Without a pidfd we cannot wait on the pipe and the exit together, so we poll this often.
_POLL_SECONDS = 0.01
# Longest single select() wait; the selector rejects an infinite timeout.
_MAX_WAIT_SECONDS = 60.0
_READ_SIZE = 65536


def run_command(
    run: str | Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    timeout_text: str,
) -> CommandResult:
    """Run `run` (a shell string or an argv list) and report how it ended; never raises."""
    argv = ["/bin/sh", "-c", run] if isinstance(run, str) else list(run)
    if not argv:
        return CommandResult(False, "could not start: empty command")
    ended = _run(
        argv, cwd, env, lambda proc: _supervise(proc, time.monotonic() + timeout, timeout_text)
    )
    return CommandResult(False, f"could not start: {ended}") if isinstance(ended, str) else ended


class CommandOutput(Record):
    """How a command run by run_capturing ended: its exit status (negative: killed by that
    signal; None: timed out, its process group killed) and its output (stdout and stderr as
    they came): the first bytes (`head`), the last ones (`tail`), and how many bytes between
    them were not kept (`cut`; 0: `head + tail` is all of it)."""

    exit: int | None
    head: bytes
    tail: bytes
    cut: int


def run_capturing(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    head: int,
    tail: int,
) -> CommandOutput | str:
    """Run `argv` (no shell) as run_command does (own process group, stdin closed, the group
    killed at the timeout), keeping the first `head` and last `tail` bytes of its output
    whatever its exit status. A str: why it could not start. Never raises."""
    if not argv:
        return "empty command"
    return _run(
        list(argv), cwd, env, lambda proc: _capture(proc, time.monotonic() + timeout, head, tail)
    )


def _run(
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    supervise: Callable[[subprocess.Popen[bytes]], _T],
) -> _T | str:
    """Start `argv` in its own process group and let `supervise` follow it to its end; a str
    says why it could not start."""
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group, so a timeout can kill it whole
        )
    except OSError as exc:
        return _os_reason(exc)
    except (ValueError, subprocess.SubprocessError) as exc:  # e.g. "embedded null byte"
        return str(exc)
    previous: dict[int, Any] = {}
    try:  # from here on: a Ctrl-C while the handlers are set still kills the group below
        previous = _end_with_the_child(proc)
        return supervise(proc)
    finally:
        # Only reached with the child still unreaped if we were interrupted (e.g. Ctrl-C):
        # don't leave its process group running behind us.
        if proc.returncode is None:
            _kill_group(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


#: signals that end smllm while a command runs: SIGINT raises KeyboardInterrupt (the `finally`
#: above kills the group); these would end the process at once and leave the group running
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _end_with_the_child(proc: subprocess.Popen[bytes]) -> dict[int, Any]:
    """While `proc` runs, SIGTERM and SIGHUP first kill its process group, then end this
    process by the same signal (its exit status says so; nothing of the call is written).
    Returns the handlers to put back. Only the main thread may set handlers: elsewhere (a
    library caller's thread) the caller's own handlers stay in charge."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def ending(signum: int, _frame: object) -> None:
        if proc.returncode is None:
            _kill_group(proc)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return {signum: signal.signal(signum, ending) for signum in _ENDING_SIGNALS}


def _supervise(proc: subprocess.Popen[bytes], deadline: float, timeout_text: str) -> CommandResult:
    kept = _Kept(0, _KEEP_BYTES)
    # Don't wait for the pipe's EOF after a success: a background grandchild may hold it for ages.
    code = _follow(proc, deadline, kept, drain=lambda code: code > 0)
    if code is None:
        return CommandResult(False, f"timed out after {timeout_text}s")
    if code == 0:
        return CommandResult(True, "")
    if code < 0:
        return CommandResult(False, "killed by a signal")
    text = kept.tail.decode("utf-8", errors="replace").rstrip()[-TAIL_CHARS:]
    return CommandResult(False, f"exited {code}: {text}" if text else f"exited {code}")


def _capture(proc: subprocess.Popen[bytes], deadline: float, head: int, tail: int) -> CommandOutput:
    kept = _Kept(head, tail)
    code = _follow(proc, deadline, kept, drain=lambda code: True)
    return CommandOutput(code, bytes(kept.head), bytes(kept.tail), kept.cut)


def _follow(
    proc: subprocess.Popen[bytes],
    deadline: float,
    kept: _Kept,
    drain: Callable[[int], bool],
) -> int | None:
    """Keep the output until the child exits (its return code; the pipe then drained for a
    moment where `drain(code)`) or the deadline passes (None; its process group killed)."""
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    pidfd = _open_pidfd(proc.pid)
    with selectors.DefaultSelector() as sel, _signal_wakeup(sel):
        sel.register(out_fd, selectors.EVENT_READ)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ)
        try:
            code = _wait(proc, sel, out_fd, kept, deadline, pidfd is None)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        if code is None:
            # Check once more: it may have exited just as the deadline passed.
            code = proc.poll()
        if code is None:
            _kill_group(proc)
            return None
        if drain(code):
            if pidfd is not None:
                sel.unregister(pidfd)
            _drain(sel, out_fd, kept, time.monotonic() + _DRAIN_SECONDS)
    return code


class _Kept:
    """What is kept of a command's output: its first `head_size` bytes, then a rolling tail of
    the last `tail_size`; `cut` counts the bytes dropped between them."""

    def __init__(self, head_size: int, tail_size: int) -> None:
        self.head_size = head_size
        self.tail_size = tail_size
        self.head = bytearray()
        self.tail = bytearray()
        self.cut = 0

    def add(self, chunk: bytes) -> None:
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.tail_size:
            self.cut += len(self.tail) - self.tail_size
            del self.tail[: len(self.tail) - self.tail_size]


def _wait(
    proc: subprocess.Popen[bytes],
    sel: selectors.BaseSelector,
    out_fd: int,
    kept: _Kept,
    deadline: float,
    polling: bool,
) -> int | None:
    """Read output until the child exits (its return code) or the deadline passes (None)."""
    while True:
        code = proc.poll()
        if code is not None:
            return code
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        wait = min(_POLL_SECONDS if polling else _MAX_WAIT_SECONDS, remaining)
        for key, _ in sel.select(wait):
            if isinstance(key.data, _Wakeup):
                key.data.empty(key.fd)  # a signal came: its Python handler runs next
            elif key.fd == out_fd and not _read_into(out_fd, kept):
                sel.unregister(out_fd)  # EOF; keep waiting for the exit alone


class _Wakeup:
    """The selector's data for the signal wakeup pipe: the signal numbers read from it."""

    def __init__(self) -> None:
        self.seen = bytearray()

    def empty(self, fd: int) -> None:
        """Read the pipe empty; the signals' Python handlers run right after."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 512):
                self.seen += chunk


@contextlib.contextmanager
def _signal_wakeup(sel: selectors.BaseSelector) -> Iterator[None]:
    """While a command runs, a signal wakes the wait on it. Python runs a signal's handler
    (KeyboardInterrupt, or SIGTERM's `ending`) in the main thread between bytecodes, so a
    signal that lands just before select() blocks, or on another thread, would wait for the
    command's next output or its exit (up to a minute): Ctrl-C or a `kill` ignored while a
    guard runs. The wakeup fd makes the C-level handler write a byte select() sees. Main
    thread only (elsewhere the caller's loop owns signals); a wakeup fd already set (an
    asyncio loop's) gets back the signal numbers it missed meanwhile."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wakeup = _Wakeup()
    read_fd, write_fd = os.pipe()
    try:
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        try:
            sel.register(read_fd, selectors.EVENT_READ, wakeup)
            yield
        finally:
            signal.set_wakeup_fd(previous)
            wakeup.empty(read_fd)
            if previous != -1 and wakeup.seen:
                with contextlib.suppress(OSError):
                    os.write(previous, bytes(wakeup.seen))
    finally:
        os.close(read_fd)
        os.close(write_fd)


def _drain(sel: selectors.BaseSelector, out_fd: int, kept: _Kept, until: float) -> None:
    """Read what is left in the pipe until EOF or `until`, whichever comes first."""
    while out_fd in sel.get_map() and (remaining := until - time.monotonic()) > 0:
        for key, _ in sel.select(remaining):
            if isinstance(key.data, _Wakeup):
                key.data.empty(key.fd)
            elif not _read_into(out_fd, kept):
                sel.unregister(out_fd)


def _read_into(fd: int, kept: _Kept) -> bool:
    """Keep one read of the output; False at EOF."""
    chunk = os.read(fd, _READ_SIZE)
    if not chunk:
        return False
    kept.add(chunk)
    return True


def _open_pidfd(pid: int) -> int | None:
    """A descriptor that polls readable when `pid` exits, or None if unsupported."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except OSError:  # kernel older than 5.3, or a sandbox that forbids it
        return None
    return fd


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group, then reap the child."""
    # The child is unreaped, so its pid (== its group id) cannot have been reused yet.
    if proc.pid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _os_reason(exc: OSError) -> str:
    """E.g. "No such file or directory: 'nosuchcmd'" (no "[Errno 2]" prefix)."""
    if exc.strerror is None:
        return str(exc)
    if exc.filename is None:
        return exc.strerror
    return f"{exc.strerror}: {exc.filename!r}"
