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
    import select
    import time

    deadline = time.monotonic() + seconds
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        if not ready:
            raise StdinTimeout(bytes(data))
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return data
        if len(data) + len(chunk) > limit:
            raise StdinTooLarge()
        data += chunk
