"""A deterministic `smllm.engine.host.Host` for tests.

`ScriptedHost` replaces everything nondeterministic or external that the engine asks its host
for (engine.md §12), so that the same calls give byte-identical replies and records:

- `now()`: a scripted clock. It starts at 2026-01-01T00:00:00Z and moves on by `step` (one
  second unless told) on every call, so readings sort in call order (`step=timedelta(0)`
  stops it, to get ties).
- `new_id(prefix)`: `prefix` + 6 characters of lowercase Crockford base32, drawn from a
  `random.Random(seed)`; the same seed gives the same ids in the same order.
- `run_command(command, cwd, env)`: nothing runs. Every call is recorded in `calls` as a
  `CommandCall`, then answered by, in order of precedence: the next queued result in
  `results` (a deque; append to it to script the next answers), else `decide(command, cwd,
  env)` when given, else the default table:

    * `test -f PATH` is ok iff PATH (after `$VAR` / `"$VAR"` expansion from `env`) is in
      `files`; `! test -f PATH` is its negation. Toggle a guard by adding or removing the
      name, e.g. `host.files.add("PLAN.md")` makes the dev machine's `planned` guard pass;
    * anything else is ok iff `ok` (default True); a failure reads `exited 1`.

- `read_prompt(path)`: the real file's text, as the real host reads it (None when it doesn't
  exist; `PromptError` when it can't be read or isn't UTF-8).

Usage (with XDG_STATE_HOME and XDG_CACHE_HOME pointing into a temp folder)::

    host = ScriptedHost(seed=7)
    app = App(cwd=str(project), host=host)
    host.files.add("PLAN.md")
    app.fire(key, "planned", (("size", "small"),))
    assert host.calls[-1].command.run == "test -f PLAN.md"
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from smllm.api.system import SystemHost
from smllm.engine.host import CommandResult
from smllm.machine.model import Command

__all__ = ["ALPHABET", "START", "CommandCall", "Decide", "ScriptedHost"]

#: engine.md §2: lowercase Crockford base32.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
#: The first reading of the scripted clock.
START = datetime(2026, 1, 1, tzinfo=UTC)

_TEST_F = re.compile(r"^(!\s*)?test\s+-f\s+(\S+)$")
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


class CommandCall(NamedTuple):
    """One `run_command` call, as the engine made it."""

    command: Command
    cwd: str
    env: dict[str, str]


Decide = Callable[[Command, str, Mapping[str, str]], CommandResult]


class ScriptedHost(SystemHost):
    """A deterministic Host: scripted clock, seeded ids, scripted commands, real prompt files."""

    def __init__(
        self,
        seed: int = 0,
        *,
        step: timedelta = timedelta(seconds=1),
        start: datetime = START,
        files: Iterable[str] = (),
        ok: bool = True,
        decide: Decide | None = None,
        results: Iterable[CommandResult] = (),
    ) -> None:
        super().__init__({})
        self.rng = random.Random(seed)
        self.clock = start
        self.step = step
        self.files: set[str] = set(files)
        self.ok = ok
        self.decide = decide
        self.results: deque[CommandResult] = deque(results)
        self.calls: list[CommandCall] = []

    def now(self) -> datetime:
        at = self.clock
        self.clock += self.step
        return at

    def new_id(self, prefix: str) -> str:
        return prefix + "".join(self.rng.choice(ALPHABET) for _ in range(6))

    def run_command(self, command: Command, cwd: str, env: Mapping[str, str]) -> CommandResult:
        self.calls.append(CommandCall(command, cwd, dict(env)))
        if self.results:
            return self.results.popleft()
        if self.decide is not None:
            return self.decide(command, cwd, env)
        return self.table(command, env)

    def table(self, command: Command, env: Mapping[str, str]) -> CommandResult:
        """The default answers (see the module docstring)."""
        run = command.run if isinstance(command.run, str) else " ".join(command.run)
        m = _TEST_F.match(run.strip())
        if m is not None:
            path = _VAR.sub(lambda v: env.get(v.group(1), ""), m.group(2)).strip("\"'")
            found = path in self.files
            ok = not found if m.group(1) else found
        else:
            ok = self.ok
        return CommandResult(True, "") if ok else CommandResult(False, "exited 1")
