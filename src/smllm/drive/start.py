"""Where a run starts: a new session (harness `run`) entering the machine, or `--session KEY`
going on from where an earlier run left it (yielded, paused, or stopped by a limit)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..api.app import App
from ..files import replace_file
from .driver import HARNESS
from .transcript import runs_folder

__all__ = ["RunRefused", "RunUsage", "begin", "go_on", "read_record", "save_record"]


class RunUsage(Exception):
    """The run can't start as asked (exit 2): a message saying what to do."""


class RunRefused(Exception):
    """The engine refused to enter (exit 1): `text` is its reply block."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass(frozen=True)
class Target:
    machine: str
    ref: str | None = None
    state: str | None = None


def _enter(app: App, key: str | None, target: Target) -> str:
    """Fire `enter` for the run (as the agent); the session's key. Without `key`, the enter
    makes the session (harness `run`), and a refused one makes none."""
    configs = app.session(key).configs if key is not None else app.configs_here()
    loaded = app.load(configs)
    machine = loaded.machines.get(target.machine)
    if machine is None:
        known = ", ".join(loaded.machines) or "none"
        raise RunUsage(f"no machine {target.machine!r} is configured here (machines: {known})")
    params: list[tuple[str, Any]] = [("stateMachine", target.machine)]
    if target.ref is not None:
        params.append((machine.ref.param, target.ref))
    if target.state is not None:
        params.append(("state", target.state))
    result = app.fire(key, "enter", tuple(params), "agent", HARNESS)
    if not result.ok or result.session is None:
        raise RunRefused(result.text())
    return result.session.key


def begin(app: App, target: Target) -> str:
    """A new session in this folder's configs, entered into `target`; its key."""
    if not app.configs_here():
        raise RunUsage(
            "no smllm config found from here: run in a project with .smllm/config.toml "
            "(smllm init), or pass --config"
        )
    return _enter(app, None, target)


def go_on(app: App, key: str, target: Target | None) -> None:
    """Make session `key` ready to go on: it holds its instance (yielded or not), or it is
    idle and re-enters `target`, else the instance its last run paused."""
    session = app.user.session(key)
    if session is None:
        raise RunUsage(f"no session {key} (smllm session list shows the sessions)")
    if session.harness != HARNESS:
        raise RunUsage(
            f"session {key} belongs to harness {session.harness}; smllm run continues only "
            "its own sessions (start one with smllm run MACHINE)"
        )
    if session.holding is not None and app.view(key, tell_late=False).reply.header.machine:
        if target is not None:
            raise RunUsage(
                f"session {key} holds an instance already: drop MACHINE, --ref and --state to "
                "go on from where it is"
            )
        return
    if target is None:
        target = _paused_by_last_run(app, key)
        if target is None:
            raise RunUsage(
                f"session {key} is idle with no paused run to continue: name a MACHINE (and "
                "--ref) to enter"
            )
    try:
        _enter(app, key, target)
    except RunRefused:
        if session.holding is None or app.session(key).holding is not None:
            raise
        # it named an instance it no longer held: that call only returned it to idle (§7.1)
        _enter(app, key, target)


def _paused_by_last_run(app: App, key: str) -> Target | None:
    """The instance the session's last run paused: per its `run.json`, else per the session's
    last event, a `pause`, else the instance the session names but no longer holds (a second
    Ctrl-C may stop a run after its pause's instance write, before `run.json` or before the
    pause's session write)."""
    record = read_record(key)
    if (
        record is not None
        and record.get("stop") in ("paused", "interrupted")
        and record.get("machine")
    ):
        instance = record.get("ref") or record.get("instance")
        return Target(str(record["machine"]), str(instance) if instance else None)
    for audit in reversed(app.user.audit(key)):
        if audit.kind == "event":
            d = audit.detail
            if d.get("event") == "pause":
                return Target(str(d["machine"]), str(d["label"]))
            break
    held = app.session(key).holding
    if held is not None:  # the pause's instance write done, its session write cut off
        return Target(held.machine, held.id)
    return None


def read_record(key: str) -> dict[str, Any] | None:
    """The summary the session's last run saved (`run.json`), if any."""
    try:
        with open(os.path.join(runs_folder(key), "run.json"), encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def save_record(key: str, summary: dict[str, Any]) -> None:
    path = os.path.join(runs_folder(key), "run.json")
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    replace_file(path, (json.dumps(summary, ensure_ascii=False, indent=2) + "\n").encode())
