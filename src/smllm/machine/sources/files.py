"""The one way smllm reads a file a user named: a config, a machine file, a prompt file, and the
cache's content check of each of them. Only a regular file is ever opened: a FIFO would block
the reader until some writer came, a socket can't be opened at all, and `/dev/zero` never ends.

Stdlib only (`os`, and `stat`, which `os` has already imported): the hook path reads through
here on every call.
"""

from __future__ import annotations

import os
import stat

__all__ = ["MISSING", "NOT_REGULAR", "read_regular"]

#: the problem of a path where nothing is (callers word it their own way)
MISSING = "missing"
NOT_REGULAR = "not a regular file"

# O_NONBLOCK: should the path become a FIFO between the stat and the open, the open returns at
# once instead of waiting for a writer (the fstat then refuses it); O_NOCTTY: a terminal
# opened here never becomes the controlling one
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


def read_regular(path: str, limit: int | None = None) -> tuple[bytes | None, str | None]:
    """(the file's bytes, None), or (None, problem): MISSING, NOT_REGULAR, the OS's reason
    (`Permission denied`), or `larger than N MiB` for a file over `limit` bytes."""
    try:
        # stat before open: opening a device can have effects of its own, a socket can't be
        # opened, and the message says what is wrong rather than "No such device or address"
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, NOT_REGULAR
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        return None, MISSING
    except ValueError:  # a NUL in the path: no file can have that name
        return None, MISSING
    except OSError as exc:
        return None, exc.strerror or str(exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, NOT_REGULAR
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read() if limit is None else f.read(limit + 1)
    except OSError as exc:
        return None, exc.strerror or str(exc)
    finally:
        os.close(fd)
    if limit is not None and len(data) > limit:
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        return None, f"larger than {size}"
    return data, None
