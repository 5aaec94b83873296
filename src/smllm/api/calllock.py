"""One call at a time per session: the session's call lock.

Two calls of one session racing (six shells firing at once) used to both run their guards, one
committing the instance and then losing the session write, so callers were told "refused" for an
event that was written. A call that writes a session (fire, the stop and prompt hooks) now takes
the session's lock first; a second call finds it held and is refused before anything runs.

The lock is `flock(2)` on `STATE_HOME/calls/KEY.lock`: the kernel drops it when the holder's
file is closed, including when the process is killed (`kill -9` mid-call never locks a
session). flock locks belong to the open file, not the process, so two calls in one process (two
threads, two `App`s) exclude each other too. The file descriptor is not inherited by the
commands a call runs (Python opens it non-inheritable), so a guard that leaves a daemon behind
doesn't keep the lock.
"""

from __future__ import annotations

import os
import sys

__all__ = ["CallLock"]

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def _file_name(key: str) -> str:
    """A file name for `key` that can't leave the folder and isn't too long for one (keys are
    ours, but a library caller may store any text): a plain key names itself; any other is
    hashed, behind a `~` no plain key has."""
    if key and len(key) <= 128 and set(key) <= _SAFE:
        return f"{key}.lock"
    import hashlib

    return "~" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest() + ".lock"


class CallLock:
    """The call lock of one session; `acquire()` is False when another call holds it."""

    def __init__(self, folder: str, key: str) -> None:
        self.path = os.path.join(folder, "calls", _file_name(key))
        self._fd: int | None = None

    def acquire(self) -> bool:
        if sys.platform == "win32":  # pragma: no cover - no flock there: no call lock
            return True
        from fcntl import LOCK_EX, LOCK_NB, flock

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            flock(fd, LOCK_EX | LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing drops the flock
