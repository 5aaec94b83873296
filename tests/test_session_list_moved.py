"""`session list` of a session whose instance left it since its last call (issue 20 §4): another
session took it over (`moved to session KEY`), or then paused or completed it (`now STATUS`).
Until that session's next call, which returns it to idle with the same finding (engine.md
§7.1), the list says so instead of showing the instance as if the session still held it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import enter_args, smllm

from smllm.engine.records import Instance, Place, Session, minute
from smllm.text.listing import SessionLine, session_table, where

AT, LATER = "2026-03-05T10:11:12.000000Z", "2026-03-05T10:12:13.000000Z"


def listed(project: Path, env: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    text = smllm(["session", "list"], project, env)
    data = smllm(["session", "list", "--json"], project, env)
    assert (text.code, text.err, data.code, data.err) == (0, "", 0, "")
    sessions: list[dict[str, Any]] = json.loads(data.out)["sessions"]
    return text.out, sessions


def row(key: str, where: str, width: int, s: dict[str, Any], project: Path) -> str:
    return f"{key}  {where.ljust(width)}  none  {minute(s['lastActive'])}  {project}\n"


def test_a_session_whose_instance_moved(project: Path, env: dict[str, str]) -> None:
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-12", "--json"],
        project,
        env,
    )
    a = json.loads(ran.out)["session"]
    b = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    took = smllm(enter_args(b, "GH-12"), project, env)
    assert took.code == 0 and f"Took over from session {a} (last active " in took.out

    # a's instance moved to b: the list says so, with the instance's state
    text, sessions = listed(project, env)
    assert [s["key"] for s in sessions] == [b, a]
    place = {"machine": "dev", "id": sessions[0]["holding"]["id"], "label": "GH-12"}
    assert sessions[0]["holding"] == {**place, "state": "PLAN"}
    assert sessions[1]["holding"] == {**place, "state": "PLAN", "movedTo": b}
    moved = f"dev › PLAN · issue GH-12 (moved to session {b})"
    width = len(moved)
    assert text == (
        row(b, "dev › PLAN · issue GH-12", width, sessions[0], project)
        + row(a, moved, width, sessions[1], project)
    )
    # its next call finds the same: the message of engine.md §7.1
    shown = smllm(["session", "show", a], project, env)
    assert f"issue GH-12 moved to session {b}; you are in idle" in shown.out

    # b paused it: a's instance is no longer held by anyone
    assert smllm(["fire", "--session", b, "pause"], project, env).code == 0
    text, sessions = listed(project, env)
    assert [s["key"] for s in sessions] == [b, a]
    assert sessions[0]["holding"] is None
    assert sessions[1]["holding"] == {**place, "state": "PLAN", "status": "paused"}
    now = "dev › PLAN · issue GH-12 (now paused)"
    assert text == row(b, "idle", len(now), sessions[0], project) + row(
        a, now, len(now), sessions[1], project
    )

    # a third session completes it
    (project / "PLAN.md").write_text("plan\n")
    c = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    for args in (
        enter_args(c, "GH-12"),
        ["fire", "--session", c, "planned", "--param", "size=small"],
    ):
        assert smllm(args, project, env).code == 0
    assert smllm(["fire", "--session", c, "done"], project, env).code == 0
    text, sessions = listed(project, env)
    assert [s["key"] for s in sessions] == [c, b, a]
    assert sessions[2]["holding"] == {**place, "state": "DONE", "status": "completed"}
    now = "dev › DONE · issue GH-12 (now completed)"
    assert text == "".join(
        row(s["key"], w, len(now), s, project)
        for s, w in zip(sessions, ["idle", "idle", now], strict=True)
    )

    # a's next event is refused and returns it to idle (engine.md §7.1): the list agrees
    refused = smllm(["fire", "--session", a, "yield"], project, env)
    assert refused.code == 1
    assert "issue GH-12 is completed; you are in idle" in refused.out
    text, sessions = listed(project, env)
    assert [s["key"] for s in sessions] == [a, c, b]
    assert [s["holding"] for s in sessions] == [None, None, None]
    assert text == "".join(row(s["key"], "idle", 4, s, project) for s in sessions)


def inst(holder: str | None, status: str, state: str = "plan", id: str = "i-1") -> Instance:
    return Instance(id, "dev", "#12", state, status, holder, None, 3, {}, None, AT, LATER)


def session(holding: Place | None, interrupted: Place | None = None) -> Session:
    return Session(
        "s1", "claude", None, "/work/p", ("a.toml",), holding, interrupted, False, 0, 1, AT, LATER
    )


def test_session_line_of_an_instance_that_left() -> None:
    base = session(None).to_json()
    here, slot_place = Place("dev", "i-1"), Place("dev", "i-2")
    held = {"machine": "dev", "id": "i-1", "label": "#12", "state": "plan"}
    cases = [
        (inst("s1", "active"), held, "dev › plan · issue #12"),
        (
            inst("s2", "active"),
            {**held, "movedTo": "s2"},
            "dev › plan · issue #12 (moved to session s2)",
        ),
        # interrupted by the session that took it over: still its, so moved
        (
            inst("s2", "interrupted"),
            {**held, "movedTo": "s2"},
            "dev › plan · issue #12 (moved to session s2)",
        ),
        (inst(None, "paused"), {**held, "status": "paused"}, "dev › plan · issue #12 (now paused)"),
        (
            inst(None, "completed", "done"),
            {**held, "state": "done", "status": "completed"},
            "dev › done · issue #12 (now completed)",
        ),
    ]
    for instance, holding, text in cases:
        line = SessionLine(session(here), instance, None, "issue", None)
        assert line.to_json() == {**base, "holding": holding}, instance
        assert where(line) == text
    line = SessionLine(session(here), inst("s2", "active"), None, "issue", None)
    assert session_table([line]) == (
        "s1  dev › plan · issue #12 (moved to session s2)  claude  2026-03-05 10:12 UTC  /work/p\n"
    )

    # the interrupted slot: taken over by another session, or no longer interrupted
    slot = {"machine": "dev", "id": "i-2", "label": "#12", "state": "plan"}
    for instance, interrupted in [
        (inst("s1", "interrupted", id="i-2"), slot),
        (inst("s2", "active", id="i-2"), {**slot, "movedTo": "s2"}),
        (inst(None, "paused", id="i-2"), {**slot, "status": "paused"}),
    ]:
        line = SessionLine(session(None, slot_place), None, instance, None, None)
        assert line.to_json() == {**base, "holding": None, "interrupted": interrupted}
        assert where(line) == "idle"
