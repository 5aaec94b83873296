"""What every surface shares about its output: the one `--json` object on standard output
(cli-and-harnesses.md §1), and a file written whole or not at all. Top-level, so smllm.harness
can use them without importing smllm.cli; smllm.cli.common builds on both."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["emit_json", "json_state", "replace_file"]

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
