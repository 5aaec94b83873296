"""engine.md §5.1 `enter`: every check and every case, with exact replies as snapshots."""

from __future__ import annotations

from pathlib import Path

from scenario import Scenario


def test_enter_refusals_in_idle(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "final")
    key = sc.session()
    before = sc.rows()
    sc.fire(key, "enter", ("stateMachine", "dev"), ("stateMachine", "dev"))
    sc.fire(key, "enter")
    sc.fire(key, "enter", stateMachine=3)
    sc.fire(key, "enter", stateMachine="nope")
    sc.fire(key, "enter", stateMachine="dev", size="small")
    sc.fire(key, "enter", stateMachine="dev", issueId=12)
    sc.fire(key, "enter", stateMachine="dev", issueId="gh-12")
    sc.fire(key, "enter", stateMachine="dev", state="WORK")
    sc.fire(key, "enter", stateMachine="dev", state="NOPE")
    sc.fire(key, "planned", size="small")
    sc.fire(key, "resume")
    sc.fire(key, "listPaused")
    assert sc.rows() == before  # a refused event changes nothing
    sc.check_snapshot("enter_refusals")


def test_enter_new_without_ref_and_initial_state(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "reenter")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="dev", state="PLAN")
    inst = sc.instance("i-000001")
    assert inst["ref"] is None and inst["state"] == "PLAN" and inst["visits"] == {"PLAN": 1}
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="reenter", state="B")
    sc.check_snapshot("enter_new")


def test_continue_jump_reopen_repair(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "final")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="final", docPath="a.md")
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="REVIEW")  # jump
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="REVIEW")  # jump to self
    sc.fire(key, "close")
    before = sc.rows()
    sc.fire(key, "enter", stateMachine="final", docPath="a.md")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="CLOSED")
    assert sc.rows() == before
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="OPEN")  # reopen
    inst = sc.instance("a.md")
    assert inst["status"] == "active" and inst["visits"] == {"OPEN": 2, "REVIEW": 2, "CLOSED": 1}
    sc.fire(key, "pause")
    sc.edit("final.smllm.yaml", "  OPEN:", "  EDIT:")
    sc.edit("final.smllm.yaml", "initial: OPEN", "initial: EDIT")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="NOPE")
    sc.fire(key, "enter", stateMachine="final", docPath="a.md", state="CLOSED")  # repair
    sc.check_snapshot("enter_continue_jump_reopen_repair")


def test_reopen_refusals(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev", "visits")
    key = sc.session()
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")
    sc.fire(key, "planned", size="small")
    (tmp_path / "PLAN.md").write_text("plan\n")
    sc.fire(key, "planned", size="small")
    sc.fire(key, "done")
    sc.fire(key, "enter", stateMachine="dev", issueId="GH-1")  # one entry point
    sc.fire(key, "enter", stateMachine="visits")
    sc.fire(key, "retry")
    sc.fire(key, "retry")
    sc.edit("visits.smllm.yaml", "meta: { entryPoint: true }", "meta: { entryPoint: false }")
    sc.fire(key, "enter", stateMachine="visits", ref="i-000002")  # no entry point at all
    sc.check_snapshot("enter_reopen_refusals")


def test_takeover_and_moved(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev")
    first = sc.session()
    second = sc.session()
    sc.fire(first, "enter", stateMachine="dev", issueId="GH-5")
    sc.fire(second, "enter", stateMachine="dev", issueId="GH-5")
    assert sc.instance("GH-5")["holder"] == second
    sc.view(first)  # a view shows the move but writes nothing
    sc.fire(first, "yield")  # the event is refused, the session goes to idle
    sc.fire(first, "yield")
    sc.check_snapshot("enter_takeover")


def test_keyless_enter(tmp_path: Path, env: dict[str, str]) -> None:
    sc = Scenario(tmp_path, "dev")
    before = sc.rows()
    sc.fire(None, "enter", stateMachine="dev", issueId="bad")
    assert sc.rows() == before  # a refused keyless enter saves nothing
    result = sc.fire(None, "enter", stateMachine="dev", issueId="GH-3")
    assert result.session is not None and result.session.harness == "none"
    sc.call_error(None, "yield")
    sc.call_error("sm-zzzzzz", "yield")
    sc.check_snapshot("enter_keyless")


def test_host_only_machine(tmp_path: Path, env: dict[str, str]) -> None:
    machine = tmp_path / "hosted.smllm.yaml"
    machine.write_text("""\
id: hosted
initial: WAIT
meta:
  smllm: 1
  events:
    built: { description: The build finished., source: host }
states:
  WAIT:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Wait for the build." } }
    on:
      built: DONE
  DONE:
    type: final
""")
    sc = Scenario(tmp_path / "p", machine)
    key = sc.session()
    sc.fire(key, "enter", stateMachine="hosted")
    sc.fire(None, "enter", stateMachine="hosted", host=True)
    host_key = sc.app.user.sessions()[0].key
    sc.fire(host_key, "built", host=True)
    sc.check_snapshot("enter_host_only")


def test_empty_values(tmp_path: Path, env: dict[str, str]) -> None:
    named = tmp_path / "named.smllm.yaml"
    named.write_text("""\
id: named
initial: NEW
meta:
  smllm: 1
  events: { name: { description: Name the instance. } }
states:
  NEW:
    meta: { entryPoint: true }
    on:
      name: { target: DONE, actions: setRef }
  DONE: { type: final }
""")
    sc = Scenario(tmp_path / "p", "fallback", named)
    key = sc.session()
    result = sc.fire(key, "enter", stateMachine="fallback", taskId="", state="")
    assert result.ok and sc.instance("i-000001")["ref"] is None  # "" counts as absent
    sc.fire(key, "pause")
    sc.fire(key, "enter", stateMachine="named")
    before = sc.rows()
    sc.fire(key, "name", ref="")
    assert sc.rows() == before
    sc.fire(key, "name", ref="first")
    sc.check_snapshot("enter_empty_values")
