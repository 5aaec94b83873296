"""Hooks where the instance store and the session disagree, on both store backends: a stop
and a session start after a takeover (engine.md §7.1, moved to session), after the instance
was paused elsewhere, and after a crash between the instance commit and the session commit
(the rest of the hooks: tests/test_hooks.py)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from conftest import Ran, smllm
from helpers.hook_runs import (
    audit,
    block_text,
    context,
    enter,
    held,
    hook,
    payload,
    sessions,
    start,
)
from helpers.storerows import StoreRows


def stop(project: Path, env: dict[str, str], host: str = "h1", active: bool = False) -> Ran:
    body = payload("claude", host, project, stop_hook_active=active)
    ran = hook("claude", "stop", body, project, env)
    assert ran.code == 0, ran
    return ran


def test_a_stop_after_a_takeover_returns_to_idle(store_project: Path, env: dict[str, str]) -> None:
    project = store_project
    a = held("claude", project, env, "h1")
    b = held("claude", project, env, "h2")  # takes GH-1 over
    moved = f"issue GH-1 moved to session {b}; you are in idle"
    before = sessions(project, env)

    # session start reads where the instance went, and writes nothing
    text = context(
        "claude",
        hook("claude", "session-start", payload("claude", "h1", project), project, env).out,
    )
    assert text.startswith(f"<smllm>\nsession {a} · idle\n"), text
    assert moved in text, text
    assert sessions(project, env) == before

    # the stop blocks once to tell the agent, returning the session to idle (audit `moved`)
    ran = stop(project, env)
    reason = json.loads(ran.out)["reason"]
    assert reason.startswith(f"<smllm>\nsession {a} · idle\n") and moved in reason, reason
    assert audit(a, project, env) == ["bind", "event", "moved"]
    mine = {s["key"]: s for s in sessions(project, env)}
    assert mine[a]["holding"] is None
    assert mine[b]["holding"]["state"] == "PLAN"
    # then it is idle: the next stop goes through; B's is blocked in PLAN
    assert (stop(project, env).out, audit(a, project, env)[-1]) == ("{}\n", "moved")
    taken = block_text(b).replace("PLAN · issue", "PLAN (visit 2) · issue")  # entered again
    assert json.loads(stop(project, env, "h2").out)["reason"] == taken
    [issue] = StoreRows.of(project, env).instance_rows(ref="GH-1")
    assert (issue["holder"], issue["version"]) == (b, 2)


def test_a_stop_after_the_instance_was_paused_elsewhere(
    store_project: Path, env: dict[str, str]
) -> None:
    project = store_project
    a = held("claude", project, env, "h1")
    b = held("claude", project, env, "h2")
    assert smllm(["fire", "--session", b, "pause"], project, env).code == 0
    reason = json.loads(stop(project, env).out)["reason"]
    assert "issue GH-1 is paused; you are in idle" in reason, reason
    assert audit(a, project, env)[-1] == "moved"
    assert stop(project, env).out == "{}\n"
    assert stop(project, env, "h2").out == "{}\n"  # B paused: idle
    [issue] = StoreRows.of(project, env).instance_rows(ref="GH-1")
    assert (issue["holder"], issue["status"], issue["version"]) == (None, "paused", 3)


def snapshot_user_store(env: dict[str, str], into: Path) -> None:
    """A copy of the user store as it is now (through SQLite's backup, WAL and all)."""
    with (
        contextlib.closing(sqlite3.connect(user_db(env))) as src,
        contextlib.closing(sqlite3.connect(into)) as dst,
    ):
        src.backup(dst)


def restore_user_store(env: dict[str, str], copy: Path) -> None:
    """The user store put back as COPY holds it: its later commits lost, as a crash between
    the instance commit and the session commit of a call leaves them."""
    with (
        contextlib.closing(sqlite3.connect(copy)) as src,
        contextlib.closing(sqlite3.connect(user_db(env))) as dst,
    ):
        src.backup(dst)


def user_db(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"


def test_hooks_and_a_crash_between_the_two_commits(
    store_project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """engine.md §10: a call that ended between its instance commit and its session commit
    leaves the instance held by a session in idle. Session start shows the session holding it
    (a view: nothing written); the stop, by the session record alone, lets it through (hook.py:
    an idle stop reads no instance); the next call writes it back (audit `moved`), even one
    refused, and then the stop blocks in PLAN."""
    project = store_project
    a = start("claude", "h1", project, env)
    copy = tmp_path / "user-before-enter.db"
    snapshot_user_store(env, copy)
    enter(a, project, env)
    restore_user_store(env, copy)
    [s] = sessions(project, env)
    assert s["holding"] is None and audit(a, project, env) == ["bind"]

    ran = hook("claude", "session-start", payload("claude", "h1", project), project, env)
    text = context("claude", ran.out)
    assert text.startswith(f"<smllm>\nsession {a} · dev › PLAN · issue GH-1\n"), text
    assert stop(project, env).out == "{}\n"
    assert sessions(project, env) == [s]  # shown, not written

    ran = smllm(["fire", "--session", a, "dance"], project, env)  # refused: not offered
    assert ran.code == 1 and "\nerror: dance is not offered here (offered: planned," in ran.out, ran
    assert audit(a, project, env) == ["bind", "moved"]
    assert json.loads(stop(project, env).out)["reason"] == block_text(a)
    assert audit(a, project, env) == ["bind", "moved", "block"]
    [s] = sessions(project, env)
    assert (s["holding"]["state"], s["blocks"]) == ("PLAN", 1)
    [issue] = StoreRows.of(project, env).instance_rows(ref="GH-1")
    assert (issue["holder"], issue["version"]) == (a, 1)  # the instance was not written


def test_a_yielded_stop_is_free_while_the_session_holds_its_instance(
    store_project: Path, env: dict[str, str]
) -> None:
    """A yielded session's stop is decided without the App (api/sessions.py stops_yielded):
    allowed with nothing written while it holds its instance; once the instance has moved, the
    stop blocks once to say so, as for any held session."""
    project = store_project
    a = held("claude", project, env, "h1")
    assert smllm(["fire", "--session", a, "yield"], project, env).code == 0
    before = (sessions(project, env), audit(a, project, env))
    for active in (False, True, False):
        assert stop(project, env, active=active).out == "{}\n"
    assert (sessions(project, env), audit(a, project, env)) == before

    b = held("claude", project, env, "h2")  # takes GH-1 over while A has yielded
    reason = json.loads(stop(project, env).out)["reason"]
    assert reason.startswith(f"<smllm>\nsession {a} · idle\n"), reason
    assert f"issue GH-1 moved to session {b}; you are in idle" in reason, reason
    assert audit(a, project, env)[-1] == "moved"
    assert stop(project, env).out == "{}\n"  # idle now


def test_a_yielded_stop_after_the_instance_was_paused_elsewhere(
    store_project: Path, env: dict[str, str]
) -> None:
    project = store_project
    a = held("claude", project, env, "h1")
    assert smllm(["fire", "--session", a, "yield"], project, env).code == 0
    b = held("claude", project, env, "h2")
    assert smllm(["fire", "--session", b, "pause"], project, env).code == 0
    reason = json.loads(stop(project, env).out)["reason"]
    assert "issue GH-1 is paused; you are in idle" in reason, reason
    assert audit(a, project, env)[-1] == "moved"
