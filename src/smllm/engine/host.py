"""The small host protocol: everything nondeterministic or IO the engine needs.

The engine is a pure function of records, inputs and what the host answers. The real host
(`smllm.api.system`) runs processes and reads files; tests script a `ScriptedHost`.
"""

from __future__ import annotations

from ..recordclass import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime
    from typing import Protocol

    from ..machine.model import Command
    from .records import Instance
else:
    Protocol = object  # the protocols only type-check; nothing isinstance-checks them

__all__ = ["CommandResult", "Host", "PromptError", "Reader"]


class CommandResult(Record):
    ok: bool
    detail: str  # "" when ok; else `exited N[: TAIL]`, `timed out after Ns`, …


class PromptError(Exception):
    """A prompt file exists but can't be read: `Prompt failed: FILE: REASON`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Host(Protocol):
    def now(self) -> datetime:
        """The current UTC time; the engine reads it once per call."""

    def new_id(self, prefix: str) -> str:
        """`prefix` + 6 random lowercase Crockford base32 characters."""

    def run_command(self, command: Command, cwd: str, env: Mapping[str, str]) -> CommandResult:
        """Run a guard or action command with the SMLLM_* variables in `env` added."""

    def read_prompt(self, path: str) -> str | None:
        """The file's text; None when it doesn't exist; PromptError for other failures."""


class Reader(Protocol):
    """Read-only access to the instance stores; reads never wait for writers."""

    def instance(self, machine: str, id: str) -> Instance | None: ...

    def find(self, machine: str, id_or_ref: str) -> Instance | None:
        """Look the value up as an id first, then as a ref (engine.md §2)."""

    def taken(self, machine: str, value: str) -> bool:
        """Whether `value` is an id or a ref of an instance of `machine`."""

    def session_taken(self, key: str) -> bool:
        """Whether a session has the key `key` (keys are drawn again while taken)."""

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]:
        """Paused instances of `machines`, most recently updated first (ties: machine, label),
        at most `limit` of them, and how many there are in all."""
