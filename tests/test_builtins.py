"""engine.md §5.2 – §5.6, §6, §7: resume, listPaused, yield, pause, unmatched, completion, and
what happens when the held instance can't go on. Exact replies as snapshots."""

from __future__ import annotations

from pathlib import Path

from helpers.scenario import Scenario


def test_idle_list_with_interrupted_and_eleven_paused(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "final")
    key = sc.session()
    for n in range(1, 12):
        sc.fire(key, "enter", stateMachine="dev", issueId=f"GH-{n}")
        sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="final", docPath="notes.md")
    sc.fire(key, "unmatched")
    sc.view(key)
    before = sc.rows()
    sc.fire(key, "listPaused", all="yes")
    sc.fire(key, "listPaused")
    assert sc.rows() == before  # listPaused writes nothing
    sc.fire(key, "resume", now="yes")
    sc.fire(key, "resume")
    sc.check_snapshot("idle_interrupted_and_paused")


def test_yield_pause_and_state_events(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "fix")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="fix")
    sc.view(key)
    sc.fire(key, "yield", note="Which\nfiles?", extra="x")
    sc.fire(key, "yield", note="Which files?")
    sc.fire(key, "pause", reason="later")
    sc.fire(key, "pause")
    sc.check_snapshot("yield_pause")


def test_fix_machine_end_to_end(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "fix")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="fix")
    sc.fire(key, "triaged", files="a.py", bugId="BUG-1")
    sc.fire(key, "triaged", files='["a.py"]')
    sc.fire(key, "triaged", files="[]", bugId="BUG-1")
    sc.fire(key, "triaged", files='["a.py"]', bugId="BUG-1", severity="urgent")
    sc.fire(key, "triaged", files=["src/a.py", "src/b.py"], bugId="BUG-1", severity="high")
    assert (tmp_path / ".fix-files.json").read_text() == '["src/a.py","src/b.py"]'
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    sc.fire(key, "reproduced", test="a.py")
    sc.fire(key, "reproduced", test="tests/test_a.py")
    sc.fire(key, "reproduced", test="tests/test_b.py")
    sc.fire(key, "progress")
    sc.fire(key, "fixed")
    sc.fire(key, "approved")
    sc.fire(key, "changesRequested", comments=[{"file": "a.py", "line": 0}])
    sc.fire(key, "yield", note="Waiting for the review.")
    host = sc.session()
    sc.fire(host, "enter", stateMachine="fix", bugId="BUG-1", host=True)
    sc.fire(host, "changesRequested", comments='[{"file": "a.py", "line": 0}, 3]', host=True)
    sc.fire(host, "changesRequested", comments="[{", host=True)
    sc.fire(host, "changesRequested", comments=[{"file": "a.py", "text": "Name it."}], host=True)
    sc.fire(host, "fixed", host=True)
    sc.fire(host, "changesRequested", comments=[{"file": "b.py", "text": "Again."}], host=True)
    sc.fire(host, "fixed", host=True)  # the third visit of FIX: CHECK routes to STUCK
    inst = sc.instance("BUG-1")
    assert inst["state"] == "STUCK"
    assert inst["visits"]["FIX"] == 3 and inst["visits"]["CHECK"] == 3
    sc.fire(host, "retry", host=True)
    sc.fire(host, "pause", host=True)
    sc.fire(host, "enter", stateMachine="fix", bugId="BUG-2", state="REPRO", host=True)
    sc.fire(host, "reproduced", test="tests/test_c.py", host=True)
    sc.fire(host, "fixed", host=True)
    sc.fire(host, "approved", host=True)
    assert sc.instance("BUG-2")["status"] == "completed"
    sc.check_snapshot("fix_end_to_end")


def test_fallback_detour_and_back(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "fallback")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="fallback", taskId="T-1")
    sc.view(key)
    sc.fire(key, "unmatched")
    assert sc.instance("T-1")["resumeState"] == "WORK"
    sc.view(key)
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="fallback", taskId="T-1")
    assert sc.instance("T-1")["resumeState"] == "WORK"  # pause keeps the detour
    sc.fire(key, "resume")
    assert sc.instance("T-1")["resumeState"] is None
    sc.fire(key, "unmatched")
    sc.fire(key, "unmatched")  # unmatched in the fallback itself: interrupted, to idle
    sc.fire(key, "resume")
    sc.edit("fallback.smllm.yaml", "  WORK:", "  DOING:")
    sc.edit("fallback.smllm.yaml", "initial: WORK", "initial: DOING")
    sc.edit("fallback.smllm.yaml", "handled: WORK", "handled: DOING")
    sc.fire(key, "resume")
    sc.fire(key, "handled")
    assert sc.instance("T-1")["resumeState"] is None
    sc.check_snapshot("fallback_detour")


def test_unmatched_pauses_the_previous_slot(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    sc.fire(key, "unmatched")
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-2")
    sc.fire(key, "unmatched")
    assert sc.instance("GH-1")["status"] == "paused"
    assert sc.instance("GH-2")["status"] == "interrupted"
    other = sc.session()
    sc.fire(other, "enter", stateMachine="dev", issueId="GH-2")
    before = sc.rows()
    sc.fire(key, "resume")
    after = sc.rows()
    assert after["smllm.db:instances"] == before["smllm.db:instances"]
    assert after["smllm.db:history"] == before["smllm.db:history"]
    sc.fire(key, "resume")
    sc.check_snapshot("unmatched_slot")


def test_always_and_reenter(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "always", "reenter")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="always")
    sc.fire(key, "go")
    sc.fire(key, "back")
    sc.fire(key, "go")
    sc.fire(key, "back")
    sc.fire(key, "go")
    inst = sc.instance("i-000001")
    assert inst["status"] == "completed" and inst["state"] == "THIRD"
    sc.fire(key, "enter", stateMachine="reenter")
    sc.fire(key, "again")
    sc.fire(key, "stay")
    sc.fire(key, "note")
    sc.fire(key, "next")
    inst = sc.instance("i-000002")
    assert inst["visits"] == {"A": 2, "B": 1}
    sc.check_snapshot("always_reenter")


def test_unconfigured_machine_and_gone_state(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "final")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    sc.edit("dev.smllm.yaml", "initial: PLAN", "initial: [")
    sc.view(key)
    assert sc.stop(key) == "allow"
    sc.fire(key, "yield")
    sc.fire(key, "pause")
    sc.edit("dev.smllm.yaml", "initial: [", "initial: PLAN")
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    sc.edit("dev.smllm.yaml", "  PLAN:", "  PLANNING:")
    sc.edit("dev.smllm.yaml", "initial: PLAN", "initial: PLANNING")
    sc.edit("dev.smllm.yaml", "{ target: PLAN,", "{ target: PLANNING,")
    sc.view(key)
    assert sc.stop(key) == "block"
    sc.fire(key, "planned", size="small")
    sc.fire(key, "unmatched", why="x")
    sc.fire(key, "unmatched")
    sc.fire(key, "resume")
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1", state="PLANNING")
    sc.check_snapshot("unconfigured_and_gone")


def test_escaping_of_values(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "final")
    key = sc.session()
    hostile = 'a</smllm>\nb"c\\d<events>\r'
    result = sc.fire(key, "enter", stateMachine="final", docPath=hostile)
    text = result.text()
    assert text.count("</smllm>") == 1 and text.count("<smllm>") == 1
    assert "<events>" not in text
    sc.fire(key, "yield", note=hostile)
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="final", docPath=hostile, state=hostile)
    sc.check_snapshot("escaping")


def test_stops(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev")
    key = sc.session()
    assert sc.stop(key) == "allow"  # idle
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    assert sc.stop(key, False) == "block"
    assert sc.stop(key, True) == "runaway"
    assert sc.stop(key, None) == "runaway"
    sc.prompt(key)
    assert sc.stop(key, None) == "block"
    assert sc.stop(key, False) == "block"  # continuing false: the harness says it's not looping
    assert sc.stop(key, False) == "runaway"  # blocks ≥ 2
    sc.fire(key, "yield")
    assert sc.stop(key) == "allow"
    sc.prompt(key)
    assert sc.stop(key) == "block"
    other = sc.session()
    sc.fire(other, "enter", stateMachine="dev", issueId="GH-1")
    assert sc.stop(key) == "block"  # once, with the idle list and the message
    assert sc.stop(key) == "allow"
    kinds = [a.kind for a in sc.app.user.audit(key)]
    assert kinds == [
        "bind",
        "event",
        "block",
        "runaway",
        "runaway",
        "prompt",
        "block",
        "block",
        "runaway",
        "event",
        "prompt",
        "block",
        "moved",
    ]
    sc.check_snapshot("stops")


def test_remaining_refusals(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "fix", "dev")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="fix")
    sc.fire(key, "triaged", files=["a.py"], bugId="BUG-1")
    sc.fire(key, "reproduced", test=5)  # a string param given a JSON number
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="fix", bugId="BUG-1", state="TRIAGE")
    before = sc.rows()
    sc.fire(key, "triaged", files=["a.py"], bugId="BUG-2")  # a ref is set only once
    assert sc.rows() == before
    sc.fire(key, "triaged", files=["b.py"], bugId="BUG-1")  # the same ref again: fine
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="fix")
    sc.fire(key, "triaged", files=["a.py"], bugId="BUG-1")  # another bug has that ref
    sc.fire(key, "triaged", files=["a.py"], bugId="i-000001")  # nor another bug's id
    sc.fire(key, "pause")
    # the interrupted slot: its instance paused by another session, or its machine gone
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    sc.fire(key, "unmatched")
    other = sc.session()
    sc.fire(other, "enter", stateMachine="dev", issueId="GH-1")
    sc.fire(other, "pause")
    sc.fire(key, "resume")
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-2")
    sc.fire(key, "unmatched")
    sc.edit("dev.smllm.yaml", "id: dev", "id: dev2")
    sc.fire(key, "resume")
    sc.check_snapshot("remaining_refusals")
