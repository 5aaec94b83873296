"""Runs of `smllm run`'s real loop (`drive.loop.Run`) in this process, fed whatever a hostile
model says, and the checks every such run must pass (issue 22, hostile model output).

    world = HostileWorld(project)             # in the project folder (cwd), work tools granted
    done = world.run([[ids of turn 1], …])    # a new session entered into dev, one run
    world.check(done)                         # the invariants; AssertionError says which

The model is the scripted backend (`drive.scripted.ScriptModel`) told to say the given ids
verbatim, so the runtime checks them as it checks any backend's. The driver records what the
policy admitted and what reached the engine and the work tools.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smllm.api.app import App
from smllm.drive.backends import scripted_runtime
from smllm.drive.driver import Driver, TurnLog
from smllm.drive.loop import ENDINGS, Run
from smllm.drive.offers import event_names
from smllm.drive.report import Report, Summary
from smllm.drive.scripted import ScriptModel
from smllm.drive.start import Target, begin
from smllm.drive.transcript import Transcript
from smllm.drive.work import Work
from smllm.smi.caps import Action, Refusal, SessionInfo
from smllm.smi.stream import Reasoning, Transmission

from .storerows import StoreRows

__all__ = ["ALLOW", "Done", "HostileWorld", "RecordingDriver", "compiled"]

#: the one shell pattern the hostile runs allow: a command with no effect on the files
ALLOW = ("echo *",)
#: how a run may end with a model error: the script ran out, or the runtime refused its ids
#: (the budget, or the parser: an empty transmission)
MODEL_ERRORS = ("ScriptEnded: ", "SmiError: ", "ParseError: ")


class RecordingDriver(Driver):
    """The run's driver, keeping every turn's log, the events the policy admitted, and
    whether each event that reached the engine was one the session offered then."""

    def __init__(self, app: App, key: str, work: Work | None) -> None:
        super().__init__(app, key, work)
        self.logs: list[TurnLog] = []
        self.admitted: list[tuple[str, Any]] = []  # each admitted event ACT: name, arguments
        self.offered: list[bool] = []

    def begin_turn(self) -> TurnLog:
        log = super().begin_turn()
        self.logs.append(log)
        return log

    def policy(self, action: Action, session: SessionInfo) -> Refusal | None:
        refusal = super().policy(action, session)
        if refusal is None and (action.name or "") not in self.work_names:
            self.admitted.append((action.name or "", action.arguments))
        return refusal

    def fire(self, event: str, params: Sequence[tuple[str, Any]]) -> tuple[bool, Any]:
        self.offered.append(event in event_names(self.app.view(self.key)))
        return super().fire(event, params)


@dataclass
class Done:
    """One finished run: its summary, driver, session, and the project's files before it."""

    summary: Summary
    driver: RecordingDriver
    key: str
    before: dict[str, bytes]
    seq: int  # the store's last history row before the run
    ref: str


def compiled(transmissions: Sequence[Transmission]) -> list[list[int]]:
    """Model transmissions as the scripted model says them (the byte vocabulary)."""
    return ScriptModel(transmissions).turns


class HostileWorld:
    """The example project (the current folder) with read, write and shell granted."""

    def __init__(self, project: Path, reasoning: Reasoning | None = None) -> None:
        self.project = project
        self.app = App()
        self.reasoning = reasoning or Reasoning("adaptive", None, 256)
        self.script = project / "empty-script.json"
        self.script.write_text('{"transmissions": []}')
        self.work = Work(os.path.realpath(project), ("read", "write", "shell"), ALLOW, 5.0)
        self.refs = 0

    def run(self, turns: Sequence[Sequence[int]], max_turns: int = 8) -> Done:
        """A new session entered into `dev`, then one run whose model says `turns`."""
        self.refs += 1
        ref = f"GH-{self.refs}"
        seq = self._history_rows(-1)[-1][0] if self.refs > 1 else 0
        key = begin(self.app, Target("dev", ref))
        driver = RecordingDriver(self.app, key, self.work)
        runtime = scripted_runtime(str(self.script), driver, 4096)
        model = runtime.backend
        assert isinstance(model, ScriptModel)
        model.turns = [list(t) for t in turns]
        before = files(self.project)
        the_run = Run(
            self.app,
            key,
            runtime,
            driver,
            reasoning=self.reasoning,
            max_turns=max_turns,
            transcript=Transcript(key),
            report=Report(io.StringIO(), False),
            work_tools=self.work.declarations(),
        )
        summary = asyncio.run(the_run.go())
        return Done(summary, driver, key, before, seq, ref)

    def check(self, done: Done, integrity: bool = True) -> None:
        """The invariants of a hostile run (each assertion says which failed)."""
        s, d = done.summary, done.driver
        assert s.stop in ENDINGS and s.stop != "interrupted", s
        if s.stop == "model-error":  # never an exception of the drive's own
            assert s.message.startswith(MODEL_ERRORS), s.message
        fired = [f for log in d.logs for f in log.fired]
        assert all(len(log.fired) <= 1 for log in d.logs), "two events fired in one turn"
        # every event that reached the engine was admitted by the policy, and offered then
        # (with the arguments the model gave as the event's params)
        reached = [(f.event, dict(f.params)) for f in fired]
        assert reached == d.admitted, (reached, d.admitted)
        assert all(d.offered), (reached, d.offered)
        assert all(f.error is None for f in fired), [f.error for f in fired]  # bad params…
        # nothing the policy refused ran: the only files changed are what accepted writes made
        worked = [w for log in d.logs for w in log.worked]
        written: dict[str, bytes] = {}
        for w in worked:
            if w.tool == "shell":
                assert w.arguments["command"].lstrip().startswith("echo"), w
            if w.tool == "write" and w.ok:
                written[w.value["path"]] = w.arguments["content"].encode()
        after = files(self.project)
        changed = {p: b for p, b in after.items() if done.before.get(p) != b}
        unexplained = sorted(p for p, b in changed.items() if written.get(p) != b)
        assert not unexplained, f"changed, but by no accepted write: {unexplained}"
        guiding = sorted(p for p in changed if p.startswith(".smllm" + os.sep))
        assert not guiding, f"the run's configs or machines changed: {guiding}"
        assert set(done.before) <= set(after), "a file disappeared"
        # the store: whole, and the session's history is exactly the accepted events
        rows = StoreRows.of(self.project)
        if integrity:
            assert rows.integrity(cli=False) == "ok"
        entered = ("enter", {"stateMachine": "dev", "issueId": done.ref})
        accepted = [entered] + [(f.event, dict(f.params)) for f in fired if f.ok]
        records = [json.loads(data) for _, data in self._history_rows(done.seq)]
        assert all(r["session"] == done.key for r in records), records  # all the run's own
        assert [(r["event"], r["params"]) for r in records] == accepted
        audit = [a.detail["event"] for a in self.app.user.audit(done.key) if a.kind == "event"]
        assert audit == [e for e, _ in accepted], (audit, accepted)
        assert s.totals.events == len(accepted) - 1

    def _history_rows(self, after: int) -> list[tuple[int, str]]:
        """The history rows after `seq` (-1: the last row alone), read from SQLite directly."""
        conn = sqlite3.connect(self.project / ".smllm" / "state" / "smllm.db", timeout=5)
        try:
            where = "ORDER BY seq DESC LIMIT 1" if after < 0 else "WHERE seq > ? ORDER BY seq"
            args = () if after < 0 else (after,)
            rows: list[tuple[int, str]] = conn.execute(
                f"SELECT seq, data FROM history {where}", args
            ).fetchall()
        finally:
            conn.close()
        return rows


def files(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` but smllm's store, by relative path: its bytes."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        rel = os.path.relpath(dirpath, folder)
        if rel == os.path.join(".smllm", "state"):
            dirnames.clear()
            continue
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                found[os.path.normpath(os.path.join(rel, name))] = path.read_bytes()
    return found
