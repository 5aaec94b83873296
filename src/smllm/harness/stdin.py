"""Reading what a client pipes to smllm on standard input, bounded in size and in time.

Hooks and the status line read one JSON object that their client writes and closes at once.
A client that keeps the pipe open without writing, or writes without end, must not hang them
or fill memory: `read_bounded` stops at a deadline and at a size limit, and keeps what it
read in one buffer.
"""

from __future__ import annotations

import os

__all__ = ["StdinTimeout", "StdinTooLarge", "read_bounded"]


class StdinTooLarge(Exception):
    """Standard input went past the size limit (reading stopped there)."""


class StdinTimeout(Exception):
    """Standard input didn't close before the deadline; `partial` holds what had arrived."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("standard input didn't close in time")
        self.partial = partial


def read_bounded(fd: int, limit: int, seconds: float) -> bytearray:
    """All of file descriptor `fd` up to its end, which must come within `seconds`; at most
    `limit` bytes (StdinTooLarge past them, StdinTimeout at the deadline)."""
    import time

    deadline = time.monotonic() + seconds
    data = bytearray()
    # what is there already is read without waiting: a client has written and closed the pipe
    # by the time its hook runs, so `select` (an import of its own) is rarely needed
    blocking = os.get_blocking(fd)
    try:
        if blocking:
            os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                _wait(fd, deadline - time.monotonic(), data)
                continue
            if not chunk:
                return data
            if len(data) + len(chunk) > limit:
                raise StdinTooLarge()
            data += chunk
    finally:
        if blocking:
            os.set_blocking(fd, True)


def _wait(fd: int, left: float, data: bytearray) -> None:
    """Until `fd` can be read, or StdinTimeout once `left` seconds have passed."""
    import select

    ready, _, _ = select.select([fd], [], [], max(left, 0))
    if not ready:
        raise StdinTimeout(bytes(data))
