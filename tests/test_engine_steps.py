"""A call's actions in order, exactly (engine/steps.py, host.py): shared actions, entry and exit
lists, transition actions and setRef, the params in the commands' environment, guards,
`always` steps (passing through, a loop, no candidate matching), and prompt files with the
implied enter-STATE.md and their failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.engine_machines import STEPS
from helpers.engine_worlds import Scripted, calls, fired, fix_world, machines_world
from helpers.memory_world import World

from smllm.engine.host import CommandResult, PromptError

# --- steps.Run: actions, shared actions, guards, always -------------------------------------------


def steps_world(tmp_path: Path) -> tuple[Scripted, str]:
    world = machines_world(tmp_path, STEPS, dirs=("sub",))
    key = world.new_session().key
    return world, key


def test_entry_lists_run_in_order(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    record, text = fired(world, key, "enter", ("stateMachine", "steps"))
    assert calls(world) == [
        ("shared before entry", "", "A", ">A", ""),
        ("a entry 0", "", "A", ">A", ""),
        ("a entry 1", "", "A", ">A", ""),
    ]
    assert text[2:] == [
        "Arrived by: enter (new job)",
        'Params: stateMachine = "steps"',
        "<instructions>",
        "In A.",
        "</instructions>",
        "</smllm>",
    ]
    # a self transition with reenter exits and enters again
    record, text = fired(world, key, "again")
    assert calls(world) == [
        ("shared before exit", "", "A", "A>A", ""),
        ("a exit", "", "A", "A>A", ""),
        ("shared before entry", "", "A", "A>A", ""),
        ("a entry 0", "", "A", "A>A", ""),
        ("a entry 1", "", "A", "A>A", ""),
    ]
    assert record.to_state == "A" and text[1].endswith("steps › A (visit 2) · job i-yrd6z1")


def test_a_failed_command_skips_the_list_s_later_commands(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"))
    calls(world)
    world.host.results.extend([CommandResult(True, "")] * 3 + [CommandResult(False, "exited 4")])
    record, text = fired(world, key, "again")
    assert [c[0] for c in calls(world)] == [
        "shared before exit",
        "a exit",
        "shared before entry",
        "a entry 0",
    ]
    assert record.trace == ("Action failed: A entry[0] command: exited 4",)
    # prompts still run after a failed command; commands of the next list run again
    assert text[3:7] == [
        "Action failed: A entry[0] command: exited 4",
        "<instructions>",
        "In A.",
        "</instructions>",
    ]
    world.host.results.append(CommandResult(False, "exited 5"))
    record, text = fired(world, key, "note")
    assert calls(world) == [("note action", "", "A", "A>A", "")]
    assert record.trace == ("Action failed: A note actions[0] command: exited 5",)
    assert record.arrival == "note from A" and record.to_state == "A"
    assert text[2:7] == [
        "Arrived by: note from A",
        "Action failed: A note actions[0] command: exited 5",
        "<instructions>",
        "Noted.",
        "</instructions>",
    ]


def test_set_ref_and_the_params_in_the_environment(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"))
    calls(world)
    record, text = fired(world, key, "tag", ("jobId", "J-7"), ("size", 3))
    assert calls(world) == [
        ("shared before exit", "", "A", "A>B", ""),
        ("a exit", "", "A", "A>B", ""),
        ("tag action", ".smllm/sub", "A", "A>B", "J-7"),  # after setRef
        ("shared before entry", "", "B", "A>B", "J-7"),
        ("shared after entry", "", "B", "A>B", "J-7"),
    ]
    assert world.reader.find("steps", "J-7") is not None
    assert text[1] == f"session {key} · steps › B · job J-7"
    assert text[3] == 'Params: jobId = "J-7", size = 3'
    assert record.params == {"jobId": "J-7", "size": 3}
    fired(world, key, "route")
    env = world.host.calls[0].env
    assert env == {
        "SMLLM_SESSION": key,
        "SMLLM_MACHINE": "steps",
        "SMLLM_INSTANCE": "i-yrd6z1",
        "SMLLM_REF": "J-7",
        "SMLLM_EVENT": "route",
        "SMLLM_STATE": "B",
        "SMLLM_FROM": "B",
        "SMLLM_TO": "R",
    }


def test_always_guards_and_passing_through(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"))
    calls(world)
    # from A, B was never visited; the command guard fails: on to DONE
    out = world.fire(key, "route").committed
    assert out.ok and out.instances[0].instance.status == "completed"
    assert out.instances[0].history.trace == (
        "Passed through: R",
        "Guard: visits B ≥ 2 → false (visits: 0)",
        "Guard: command `test -f go` → false (exited 1)",
    )
    assert out.instances[0].history.arrival == "route from A via R"
    assert calls(world) == [
        ("shared before exit", "", "A", "A>R", ""),
        ("a exit", "", "A", "A>R", ""),
        ("test -f go", "", "R", "-", ""),
    ]


def test_always_back_and_forth(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"))
    fired(world, key, "tag", ("jobId", "J-7"))
    calls(world)
    world.host.files.add("go")
    record, text = fired(world, key, "route")
    assert record.trace == (
        "Passed through: R",
        "Guard: visits B ≥ 2 → false (visits: 1)",
        "Guard: command `test -f go` → true",
    )
    assert text[1:5] == [
        f"session {key} · steps › B (visit 2) · job J-7",
        "Arrived by: route from B via R",
        "Guard: visits B ≥ 2 → false (visits: 1)",
        "Guard: command `test -f go` → true",
    ]
    assert calls(world) == [
        ("shared before exit", "", "B", "B>R", "J-7"),
        ("shared after exit", "", "B", "B>R", "J-7"),
        ("test -f go", "", "R", "-", "J-7"),
        ("shared before entry", "", "B", "R>B", "J-7"),
        ("shared after entry", "", "B", "R>B", "J-7"),
    ]
    record, text = fired(world, key, "route")
    assert record.trace == ("Passed through: R", "Guard: visits B ≥ 2 → true (visits: 2)")
    assert (record.from_state, record.to_state) == ("B", "A")
    assert text[1] == f"session {key} · steps › A (visit 2) · job J-7"
    assert world.reader.find("steps", "J-7").visits == {"A": 2, "B": 2, "R": 2}


def test_failed_exit_and_transition_commands_are_named(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"), ("jobId", "J-1"))
    calls(world)
    fail = CommandResult(False, "exited 3")
    world.host.results.extend([CommandResult(True, ""), fail, fail])
    record, _text = fired(world, key, "tag", ("size", 30))
    assert record.trace == (
        "Action failed: A exit[0] command: exited 3",
        "Action failed: A tag actions[1] command: exited 3",
    )
    # setRef without the ref param keeps the ref; a JSON param reaches commands as JSON text
    assert world.host.calls[2].env == {
        "SMLLM_SESSION": key,
        "SMLLM_MACHINE": "steps",
        "SMLLM_INSTANCE": "i-yrd6z1",
        "SMLLM_REF": "J-1",
        "SMLLM_EVENT": "tag",
        "SMLLM_STATE": "A",
        "SMLLM_FROM": "A",
        "SMLLM_TO": "B",
        "SMLLM_PARAM_SIZE": "30",
    }
    assert world.reader.find("steps", "J-1") is not None


def rerouted(world: Scripted, *always: Any) -> Scripted:
    """The world with state R of the steps machine given other `always` candidates."""
    m = world.loaded.machines["steps"]
    states = {**m.states, "R": m.states["R"]._replace(always=always)}
    loaded = world.loaded._replace(machines={"steps": m._replace(states=states)})
    return World(loaded, world.host, cwd=world.cwd, reader=world.reader)


def test_always_with_no_candidate_matching_stops_there(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"))
    r = world.loaded.machines["steps"].states["R"]
    record, text = fired(rerouted(world, *r.always[:2]), key, "route")
    assert record.to_state == "R"
    assert record.trace == (
        "Guard: visits B ≥ 2 → false (visits: 0)",
        "Guard: command `test -f go` → false (exited 1)",
        "No always transition of R matched; stopped there",
    )
    assert text[1] == f"session {key} · steps › R · job i-yrd6z1"


def test_always_stops_after_a_loop(tmp_path: Path) -> None:
    world, key = steps_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "steps"))
    calls(world)
    r = world.loaded.machines["steps"].states["R"]
    loop = r.always[2]._replace(
        target="R",
        actions=(r.always[2].actions or ()) + world.loaded.machines["steps"].states["A"].exit,
    )
    world.host.results.extend([CommandResult(True, "")] * 3 + [CommandResult(False, "exited 6")])
    record, _text = fired(rerouted(world, loop), key, "route")
    assert record.to_state == "R"
    assert record.trace == (
        *["Passed through: R"] * 32,
        "Stopped after 32 always transitions; check for a loop",
        "Action failed: R always actions[0] command: exited 6",
    )
    assert record.arrival == "route from A via " + ", ".join(["R"] * 32)
    ran = calls(world)
    assert ran[2:4] == [("a exit", "", "R", "R>R", ""), ("a exit", "", "R", "R>R", "")]
    assert len(ran) == 2 + 32


# --- prompts: files, the implied enter-STATE.md, failures -----------------------------------------


def instructions(text: list[str]) -> list[str]:
    return text[text.index("<instructions>") + 1 : text.index("</instructions>")]


def test_prompt_files_and_the_implied_entry_prompt(tmp_path: Path) -> None:
    world, key, _folder = fix_world(tmp_path)
    _record, text = fired(world, key, "enter", ("stateMachine", "fix"))
    assert instructions(text) == [
        "Triage the bug: find the files it touches.",
        "Then fire triaged with the bug id and the files.",
    ]
    record, text = fired(world, key, "triaged", ("files", ["a.py"]), ("bugId", "BUG-1"))
    # TRIAGE's exit prompt, the shared prompt before REPRO's own, then enter-REPRO.md
    assert instructions(text) == [
        "Keep .fix-files.json out of your commits.",
        "",
        "Change only the files you named at triage.",
        "",
        "Write a test that shows the bug, then fire reproduced.",
    ]
    assert world.host.calls[0].env["SMLLM_PARAM_FILES"] == '["a.py"]'
    world.host.calls.clear()
    # leaving REPRO shows no enter-REPRO.md; entering it again does
    world.host.files.add("tests/t.py")
    record, text = fired(world, key, "reproduced", ("test", "tests/t.py"))
    assert record.to_state == "REPRO"
    assert record.trace == ('Guard: command `! test -f "$SMLLM_PARAM_TEST"` → false (exited 1)',)
    assert instructions(text) == [
        "That test passes, so it doesn't show the bug.",
        "",
        "Change only the files you named at triage.",
        "",
        "Write a test that shows the bug, then fire reproduced.",
    ]
    world.host.files.clear()
    _record, text = fired(world, key, "reproduced", ("test", "tests/t.py"))
    assert instructions(text) == [
        "Change only the files you named at triage.",
        "",
        "Fix the bug until the test passes, then fire fixed.",
    ]


def test_prompt_files_that_fail(tmp_path: Path) -> None:
    world, key, folder = fix_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "fix"), ("bugId", "BUG-1"), ("state", "REPRO"))
    fired(world, key, "reproduced", ("test", "tests/t.py"))
    _record, text = fired(world, key, "progress")
    assert instructions(text) == ["- the test fails before the fix", "- the test passes after it"]
    (folder / "prompts" / "checklist.md").unlink()
    record, text = fired(world, key, "progress")
    assert record.trace == ("Prompt failed: prompts/checklist.md: not found",)
    assert text[3] == "Prompt failed: prompts/checklist.md: not found"
    assert "<instructions>" not in text
    (folder / "prompts" / "checklist.md").write_bytes(b"\xff\xfe bad")
    record, _text = fired(world, key, "progress")
    (failure,) = record.trace
    assert failure.startswith("Prompt failed: prompts/checklist.md: ")
    assert failure != "Prompt failed: prompts/checklist.md: not found"
    # an implied enter-STATE.md is optional: gone, it fails nothing
    fired(world, key, "pause")
    (folder / "enter-REPRO.md").write_bytes(b"\xff\xfe bad")
    record, _text = fired(world, key, "enter", ("stateMachine", "fix"), ("state", "REPRO"))
    (failure,) = record.trace
    assert failure.startswith("Prompt failed: enter-REPRO.md: ")
    fired(world, key, "pause")
    (folder / "enter-REPRO.md").unlink()
    record, text = fired(world, key, "enter", ("stateMachine", "fix"), ("state", "REPRO"))
    assert record.trace == () and instructions(text) == [
        "Change only the files you named at triage."
    ]


def test_a_prompt_file_s_failure_names_its_reason(tmp_path: Path) -> None:
    assert PromptError("not UTF-8").reason == "not UTF-8"
    world, key, folder = fix_world(tmp_path)
    fired(world, key, "enter", ("stateMachine", "fix"), ("bugId", "BUG-1"), ("state", "REPRO"))
    fired(world, key, "reproduced", ("test", "tests/t.py"))
    (folder / "prompts" / "checklist.md").write_bytes(b"\xff\xfe bad")
    record, text = fired(world, key, "progress")
    (failure,) = record.trace
    assert failure == "Prompt failed: prompts/checklist.md: not UTF-8"
    assert text[3] == failure
