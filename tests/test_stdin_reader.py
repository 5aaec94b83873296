"""harness.stdin.read_bounded, in-process on real pipes: what a hook or the status line reads
from its client, bounded in size and time, and the descriptor left as it was found."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import pytest

from smllm.harness.stdin import StdinTimeout, StdinTooLarge, read_bounded


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_what_was_written_and_closed_is_read_at_once(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, b'{"session_id": "a"}')
    os.close(write_fd)
    assert read_bounded(read_fd, 1 << 20, 5.0) == b'{"session_id": "a"}'
    assert os.get_blocking(read_fd) is True  # given back as it was


def test_a_slow_writer_is_waited_for(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe

    def write() -> None:
        os.write(write_fd, b"first ")
        time.sleep(0.3)
        os.write(write_fd, b"second")
        time.sleep(0.2)
        os.close(write_fd)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_bounded(read_fd, 1 << 20, 5.0) == b"first second"
    finally:
        writer.join()
    assert os.get_blocking(read_fd) is True


def test_a_pipe_left_open_times_out_with_what_came(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, b"part")
    t0 = time.monotonic()
    with pytest.raises(StdinTimeout) as caught:
        read_bounded(read_fd, 1 << 20, 0.3)
    assert 0.25 <= time.monotonic() - t0 < 3
    assert caught.value.partial == b"part"
    assert os.get_blocking(read_fd) is True


def test_past_the_limit_reading_stops(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, b"x" * 101)
    with pytest.raises(StdinTooLarge):
        read_bounded(read_fd, 100, 5.0)
    assert os.get_blocking(read_fd) is True
    os.write(write_fd, b"y")  # still a pipe this process can use
    os.close(write_fd)
    assert read_bounded(read_fd, 100, 5.0) == b"y"


def test_exactly_the_limit_is_read(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, b"x" * 100)
    os.close(write_fd)
    assert read_bounded(read_fd, 100, 5.0) == b"x" * 100


def test_a_non_blocking_descriptor_stays_so(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.set_blocking(read_fd, False)
    os.write(write_fd, b"data")
    os.close(write_fd)
    assert read_bounded(read_fd, 100, 5.0) == b"data"
    assert os.get_blocking(read_fd) is False
