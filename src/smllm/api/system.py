"""The real host: the system clock, the OS's random bytes, processes and files."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from ..engine.host import CommandResult
    from ..machine.model import Command

__all__ = ["ALPHABET", "SeededHost", "SystemHost", "random_id"]

#: engine.md §2: lowercase Crockford base32.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def random_id(prefix: str) -> str:
    # 256 is a multiple of 32, so `byte % 32` is unbiased
    return prefix + "".join(ALPHABET[b % 32] for b in os.urandom(6))


class SystemHost:
    """The host of every real call; `now` is read once per call by the engine."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env if env is not None else os.environ)

    def now(self) -> datetime:
        from ..clock import utc_now

        return utc_now()

    def new_id(self, prefix: str) -> str:
        return random_id(prefix)

    def run_command(self, command: Command, cwd: str, env: Mapping[str, str]) -> CommandResult:
        from ..engine.host import CommandResult
        from .processes import run_command

        full = {**self.env, **env}
        result = run_command(
            command.run,
            cwd=cwd,
            env=full,
            timeout=command.timeout,
            timeout_text=command.timeout_text,
        )
        return CommandResult(result.ok, result.detail)

    def read_prompt(self, path: str) -> str | None:
        from ..engine.host import PromptError
        from ..machine.checks.deep import read_text

        text, problem = read_text(path)
        if problem == "missing":
            return None
        if problem is not None:
            raise PromptError(problem)
        return text


class SeededHost(SystemHost):
    """The real host with ids drawn from a seeded generator: `smllm run --seed N`. The session
    key and the instance id are in the text the model reads, so a seeded run repeats only if
    they do. An id already taken is drawn again from the same stream (the engine asks), so a
    run repeats in the same state: a fresh state folder, or the same store contents."""

    def __init__(self, seed: int, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        import random  # `smllm run` only: not on the hook path

        self.draws = random.Random(f"smllm-ids-{seed}")

    def new_id(self, prefix: str) -> str:
        return prefix + "".join(self.draws.choice(ALPHABET) for _ in range(6))
