"""Reading and writing the clients' files: whole or not at all (a temporary file beside the
real one, synced, then renamed), through symlinks (a `CLAUDE.md → AGENTS.md` link stays a
link) and keeping the file's mode (cli-and-harnesses.md §6, "Merges")."""

from __future__ import annotations

import contextlib
import os

from ...files import replace_file
from .jsonfile import Broken

__all__ = ["read_text", "remove_file", "write_text"]


def read_text(path: str) -> str | None:
    """The file's text with its line endings, None when absent; Broken when it is not a
    regular file (a FIFO is never opened: it would hang the install) or not UTF-8."""
    from ...files import MISSING, read_regular

    if not os.path.lexists(path):  # also a path through a file (the write then says why)
        return None
    data, problem = read_regular(path)
    if problem == MISSING:
        raise Broken("a symlink to nothing")
    if data is None:
        raise Broken(problem or "unreadable")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Broken("not UTF-8 text") from None


def write_text(path: str, text: str) -> None:
    """Replace the file the path leads to (through symlinks) with `text`, keeping its mode
    (`files.replace_file`); folders are made as needed. Raises OSError."""
    os.makedirs(os.path.dirname(os.path.realpath(path)), exist_ok=True)
    replace_file(path, text.encode("utf-8"))


def remove_file(path: str, empty: str, stop: str) -> None:
    """Delete a file smllm emptied, then the folders inside `stop` (the project or home folder)
    that this left empty; a symlink instead keeps its target, holding `empty`. Raises
    OSError."""
    if os.path.islink(path):
        write_text(path, empty)
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    folder = os.path.dirname(path)
    while folder.startswith(stop.rstrip(os.sep) + os.sep):
        try:
            os.rmdir(folder)
        except OSError:  # not empty: the user's files stay, and the folders above them
            return
        folder = os.path.dirname(folder)
