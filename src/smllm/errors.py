"""Every error the smllm library raises, and the exit code a surface gives it.

    SmllmError                      the root; `exit_code` is what the CLI exits with
    ├── NoConfig         exit 2     no config is found where the command needs one
    ├── NotFound         exit 1     a lookup (an instance, a machine) found nothing, or several
    ├── CallError        exit 1     a call that can't be answered with a block: no or unknown
    │   │                           session key, params that aren't a JSON object
    │   └── SessionBusy  exit 1     another call of the session is still running (engine.md §10)
    └── StoreError       exit 2     a store that can't be opened, read or created
        ├── StoreBusy    exit 1     a writer waited 5 s for a lock (cli-and-harnesses.md §1)
        ├── StoreTooNew  exit 2     written by a newer smllm
        ├── StoreConflict           a lost race: the record changed since it was read; the
        │                           library turns it into the engine's reply, so no surface
        │                           sees it
        └── RefTaken                a new ref (or id) taken meanwhile; likewise

A refusal of an event is not an error: it is a value (a `Reply` with `error`), exit 1. Errors in
machine files and configs are findings (`machine/findings.py`), not exceptions. Our own API
misuse raises `ValueError` or `TypeError`; anything else reaching a surface is an internal
error (exit 2, `error: internal error: …`, never a traceback).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO

__all__ = [
    "CallError",
    "NoConfig",
    "NotFound",
    "RefTaken",
    "SessionBusy",
    "SmllmError",
    "StoreBusy",
    "StoreConflict",
    "StoreError",
    "StoreTooNew",
    "debug_traceback",
    "internal_error",
    "quiet_closed_stdout",
]


class SmllmError(Exception):
    """The root of smllm's errors; `str(error)` is the one-line message after `error: `."""

    exit_code = 2


class NoConfig(SmllmError):
    exit_code = 2

    def __init__(self) -> None:
        super().__init__("no config found; run smllm init, or pass --config")


class NotFound(SmllmError):
    exit_code = 1


class CallError(SmllmError):
    """A call that isn't a refusal in a block (cli-and-harnesses.md §3)."""

    exit_code = 1


class SessionBusy(CallError):
    """Another call of this session holds its call lock; nothing was read or written."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"session {key} is busy with another call; wait for its reply, then fire again"
        )
        self.key = key


class StoreError(SmllmError):
    """The store can't be used."""

    exit_code = 2


class StoreBusy(StoreError):
    exit_code = 1

    def __init__(self) -> None:
        super().__init__("the store is busy")


class StoreTooNew(StoreError):
    def __init__(self, name: str) -> None:
        super().__init__(f"{name} was written by a newer smllm")


class StoreConflict(StoreError):
    """Another writer changed the record since it was read (a lost race)."""

    exit_code = 1

    def __init__(self, machine: str, id: str) -> None:
        super().__init__(f"{machine}/{id} changed")
        self.machine = machine
        self.id = id


class RefTaken(StoreError):
    """A new instance's ref (or id) is already taken in its machine."""

    exit_code = 1

    def __init__(self, machine: str, ref: str) -> None:
        super().__init__(f"{machine}/{ref} taken")
        self.machine = machine
        self.ref = ref


def internal_error(exc: BaseException) -> str:
    """The message of an error smllm didn't expect (after `error: `): every surface words it
    the same way, and none prints a traceback unless SMLLM_DEBUG asks for one."""
    return f"internal error: {type(exc).__name__}: {exc}"


def debug_traceback(err: TextIO, environ: Mapping[str, str]) -> None:
    """The traceback of the exception being handled, on `err`, when SMLLM_DEBUG is set in
    `environ` (a surface never shows one otherwise); shared by the CLI and the hooks."""
    if environ.get("SMLLM_DEBUG"):
        import traceback

        traceback.print_exc(file=err)


def quiet_closed_stdout(stream: TextIO) -> None:
    """After a BrokenPipeError on stdout: its fd points at /dev/null, so the interpreter's last
    flush can't fail too (a closed stdout pipe ends a command quietly, cli-and-harnesses.md
    §1); shared by the CLI and the hooks."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass
