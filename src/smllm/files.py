"""What every part shares about files and output: the one way smllm reads a file a user named
(read_regular), a file written whole or not at all, and the one `--json` object on standard
output (cli-and-harnesses.md §1). Top-level, so the machines' cache and smllm.harness use them
without importing smllm.cli or another package; smllm.cli.common builds on them.

read_regular opens only a regular file: a FIFO would block the reader until some writer came, a
socket can't be opened at all, and `/dev/zero` never ends. Stdlib only (`os`, and `stat`, which
`os` has already imported): the hook path reads through it on every call."""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MISSING", "NOT_REGULAR", "emit_json", "json_state", "read_regular", "replace_file"]

#: whether this command wants `--json`, and whether it printed its object (main() prints
#: `{"ok":false,"error":…}` for an exit 1 that printed none: exactly one object, always)
json_state = {"wanted": False, "emitted": False}


def emit_json(obj: Any) -> None:
    from .jsontext import dumps

    sys.stdout.write(dumps(obj) + "\n")
    json_state["emitted"] = True


def replace_file(path: str, data: bytes) -> None:
    """Replace the file `path` leads to with `data`, whole or not at all: a temporary file
    beside it, synced, then renamed over it. Through symlinks (a link stays a link, its target
    is written) and keeping the file's mode. Raises OSError, leaving no temporary file."""
    import contextlib

    real = os.path.realpath(path)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(real).st_mode & 0o7777
    tmp = f"{real}.{os.getpid()}.smllm-tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, real)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
