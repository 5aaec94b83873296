"""A `Scenario`: a project, a deterministic host and a log of calls with their exact replies.

Each step appends `$ CALL` and the reply to the log; `check_snapshot` compares the whole log
with `tests/snapshots/NAME.txt` (SMLLM_UPDATE_SNAPSHOTS=1 rewrites the file instead).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from smllm.api.app import App, CallError, Result
from smllm.api.system import SystemHost

ROOT = Path(__file__).resolve().parents[1]  # tests/
SNAPSHOTS = ROOT / "snapshots"
MACHINES = ROOT / "machines"
EXAMPLE = ROOT.parent / "src" / "smllm" / "examples" / "dev" / "dev.smllm.yaml"


class StepHost(SystemHost):
    """The real host, but with a clock that moves one minute a call and counted ids."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
        self.counts: dict[str, int] = {}

    def now(self) -> datetime:
        self.clock += timedelta(minutes=1)
        return self.clock

    def new_id(self, prefix: str) -> str:
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        return f"{prefix}{self.counts[prefix]:06d}"


class Scenario:
    def __init__(self, folder: Path, *machines: str | Path, config_extra: str = "") -> None:
        """A project in `folder` whose config lists `machines` (fixture names or paths)."""
        self.folder = folder
        self.smllm_dir = folder / ".smllm"
        self.smllm_dir.mkdir(parents=True, exist_ok=True)
        files = []
        for m in machines:
            src = Path(m) if isinstance(m, Path) else _fixture(m)
            if src.name == "fix.smllm.yaml":
                shutil.copytree(src.parent, self.smllm_dir, dirs_exist_ok=True)
            else:
                shutil.copy(src, self.smllm_dir / src.name)
            files.append(src.name)
        listed = ", ".join(f'"{f}"' for f in files)
        (self.smllm_dir / "config.toml").write_text(
            f"[machines]\nfiles = [{listed}]\n{config_extra}"
        )
        self.host = StepHost()
        self.app = App(cwd=str(folder), host=self.host)
        self.log: list[str] = []

    # -- calls ---------------------------------------------------------------------------------

    def session(self) -> str:
        key = self.app.new_session().key
        self.log.append(f"$ session new → {key}")
        return key

    def fire(
        self,
        key: str | None,
        event: str,
        *params: tuple[str, Any],
        host: bool = False,
        **named: Any,
    ) -> Result:
        given = tuple(params) + tuple(named.items())
        shown = " ".join(f"{n}={json.dumps(v, ensure_ascii=False)}" for n, v in given)
        who = " --host" if host else ""
        self.log.append(f"$ fire{who} {key or '(no key)'} {event} {shown}".rstrip())
        result = self.app.fire(
            key, event, given, "host" if host else "agent", "host" if host else "none"
        )
        self.log.append(result.text())
        self.log.append("[ok]" if result.ok else "[refused]")
        return result

    def call_error(self, key: str | None, event: str) -> str:
        try:
            self.app.fire(key, event, ())
        except CallError as exc:
            self.log.append(f"$ fire {key or '(no key)'} {event}")
            self.log.append(f"error: {exc}")
            return str(exc)
        raise AssertionError("expected a call error")

    def view(self, key: str) -> str:
        text = self.app.view(key).text()
        self.log.append(f"$ session show {key}")
        self.log.append(text)
        return text

    def stop(self, key: str, continuing: bool | None = None) -> str:
        outcome = self.app.stop(key, continuing)
        from smllm.text.block import render

        self.log.append(f"$ stop {key} continuing={continuing}")
        self.log.append(f"→ {outcome.decision}")
        if outcome.reply is not None:
            self.log.append(render(outcome.reply))
        return outcome.decision

    def prompt(self, key: str) -> None:
        self.log.append(f"$ prompt {key}")
        self.app.prompt_submitted(key)

    def note(self, text: str) -> None:
        self.log.append(f"# {text}")

    # -- files and store -----------------------------------------------------------------------

    def edit(self, name: str, old: str, new: str) -> None:
        """Change a machine file (the cache notices by size, mtime or content)."""
        path = self.smllm_dir / name
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new))
        self.log.append(f"# edited {name}: {old!r} → {new!r}")

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every store, to compare before and after a call."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        for db in [
            self.smllm_dir / "state" / "smllm.db",
            Path(os.environ["XDG_STATE_HOME"]) / "smllm" / "user.db",
        ]:
            if not db.exists():
                continue
            conn = sqlite3.connect(db)
            for (table,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            ):
                out[f"{db.name}:{table}"] = conn.execute(f"SELECT * FROM {table}").fetchall()
            conn.close()
        return out

    def instance(self, label: str, machine: str | None = None) -> dict[str, Any]:
        conn = sqlite3.connect(self.smllm_dir / "state" / "smllm.db")
        rows = conn.execute(
            "SELECT data FROM instances WHERE (ref = ? OR id = ?)"
            + (" AND machine = ?" if machine else ""),
            (label, label, machine) if machine else (label, label),
        ).fetchall()
        conn.close()
        assert len(rows) == 1, rows
        data: dict[str, Any] = json.loads(rows[0][0])
        return data

    # -- snapshots -----------------------------------------------------------------------------

    def check_snapshot(self, name: str) -> None:
        text = "\n".join(self.log) + "\n"
        path = SNAPSHOTS / f"{name}.txt"
        if os.environ.get("SMLLM_UPDATE_SNAPSHOTS") or not path.exists():
            SNAPSHOTS.mkdir(exist_ok=True)
            path.write_text(text)
            if not os.environ.get("SMLLM_UPDATE_SNAPSHOTS"):
                raise AssertionError(f"wrote a new snapshot {path.name}; review it and rerun")
            return
        assert text == path.read_text(), f"snapshot {name} differs"


def _fixture(name: str) -> Path:
    if name == "dev":
        return EXAMPLE
    if name == "fix":
        return MACHINES / "fix" / "fix.smllm.yaml"
    return MACHINES / f"{name}.smllm.yaml"
