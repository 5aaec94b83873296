"""validation.md §1: every finding at once, where the machine can be read that far. A machine
with structure errors still gets its warnings and info (lint.py, deep.py), except where an error
leaves the answer a guess or the warning would repeat the error (lint.Broken)."""

from __future__ import annotations

from pathlib import Path

import pytest

from smllm.machine.loader.load import load_machine_source


def findings(folder: Path, text: str) -> list[str]:
    """The findings of machine `text` in `folder`, in validate's order, as validate writes them."""
    path = folder / "m.smllm.yaml"
    path.write_text(text)
    result = load_machine_source(text, str(path), "m.smllm.yaml")
    assert result.machine is None or not any(f.level == "error" for f in result.findings)
    return [f.text() for f in sorted(result.findings, key=lambda f: f.in_file_order())]


WARNED = """\
id: w
initial: A
meta:
  smllm: 1
  events:
    enter: { description: Start. }
    unused: { description: Never used. }
    go:
      params:
        type: object
        properties:
          state: { type: string }
states:
  A:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: { target: B, reenter: true }
      stay: { target: A, guard: { type: nope } }
    always: B
  B:
    on:
      go: A
  C:
    type: final
    meta: { entryPoint: true }
    exit: { type: prompt, params: { text: Bye. } }
  D: {}
"""


def test_warnings_and_info_beside_an_error(tmp_path: Path) -> None:
    """A guard error (MCH-9) touches no other rule's part: every warning and info shows."""
    assert findings(tmp_path, WARNED) == [
        "m.smllm.yaml:6:5: warning: meta.events.enter: enter is only offered in idle, which "
        "shows its own description (AGT-4)",
        "m.smllm.yaml:7:5: warning: meta.events.unused: no state uses unused (EVT-10)",
        "m.smllm.yaml:12:11: warning: meta.events.go.params.properties.state: param state of go "
        "looks like enter's (EVT-7)",
        "m.smllm.yaml:18:7: warning: states.A.on.go: go has no description in A (AGT-3)",
        "m.smllm.yaml:18:33: warning: states.A.on.go.reenter: reenter has no effect here (MCH-16)",
        "m.smllm.yaml:19:7: warning: states.A.on.stay: stay has no description in A (AGT-3)",
        "m.smllm.yaml:19:41: error: states.A.on.stay.guard.type: guard type nope doesn't exist "
        "(types: command, visits) (MCH-9)",
        "m.smllm.yaml:20:5: warning: states.A.always: A has always, so its on events are never "
        "offered (MCH-14)",
        "m.smllm.yaml:21:3: info: states.B: the agent gets no instructions in B (AGT-5)",
        "m.smllm.yaml:23:7: warning: states.B.on.go: go has no description in B (AGT-3)",
        "m.smllm.yaml:26:25: warning: states.C.meta.entryPoint: entering C completes the "
        "instance at once (MCH-17)",
        "m.smllm.yaml:27:5: warning: states.C.exit: exit actions of final state C never run "
        "(MCH-15)",
        "m.smllm.yaml:28:3: info: states.D: the agent gets no instructions in D (AGT-5)",
        "m.smllm.yaml:28:3: warning: states.D: D can't be reached (MCH-13)",
    ]


GRAPH = """\
id: g
initial: A
meta:
  smllm: 1
  events: { go: { description: Go on. } }
states:
  A:
    meta: { fallback: true }
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: B
  B:
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: C
  C:
    type: final
"""


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("initial: A", "initial: X", "2:10: error: initial: initial state X doesn't exist (MCH-1)"),
        ("go: C", "go: CC", "15:11: error: states.B.on.go: no state named CC (MCH-2)"),
        (
            "on:\n      go: C",
            "always: { reenter: true }",
            "14:13: error: states.B.always: an always transition must lead to another state "
            "(MCH-5)",
        ),
        (
            "  B:\n",
            "  B:\n    type: final\n",
            "16:7: error: states.B.on: final state B can't have on (MCH-6)",
        ),
        ("go: C", "pause: C", "15:7: error: states.B.on.pause: pause is a built-in event (EVT-5)"),
    ],
    ids=["MCH-1", "MCH-2", "MCH-5", "MCH-6", "EVT-5"],
)
def test_no_reachability_while_the_graph_is_broken(
    tmp_path: Path, old: str, new: str, error: str
) -> None:
    """With an error in the graph (a missing target, a dropped built-in transition, …) a state
    may be unreachable only until the fix: MCH-13 waits, and nothing else is guessed."""
    text = GRAPH.replace(old, new, 1)
    assert text != GRAPH
    got = findings(tmp_path, text)
    assert [f for f in got if "(MCH-13)" in f] == []
    assert got == [f"m.smllm.yaml:{error}"]


def test_reachability_with_two_fallback_states(tmp_path: Path) -> None:
    """A second fallback state (MCH-7) leaves the graph known: every state marked fallback is
    a root, so the second one isn't reported, and a state no root reaches still is, at once
    (validation.md §4)."""
    two = "  D:\n    meta: { fallback: true }\n    type: final\n  C:\n"
    got = findings(tmp_path, GRAPH.replace("  C:\n", two, 1))
    assert got == [
        "m.smllm.yaml:17:23: error: states.D.meta.fallback: D is also a fallback state (first: "
        "A) (MCH-7)",
    ]
    lost = GRAPH.replace("  C:\n", two, 1) + "  E:\n    type: final\n"
    got = findings(tmp_path, lost)
    assert got == [
        "m.smllm.yaml:17:23: error: states.D.meta.fallback: D is also a fallback state (first: "
        "A) (MCH-7)",
        "m.smllm.yaml:21:3: warning: states.E: E can't be reached (MCH-13)",
    ]


FINAL = """\
id: f
initial: A
meta:
  smllm: 1
  events: { go: { description: Go on. } }
states:
  A:
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: { target: AA, reenter: true }
      other: { target: B, description: Other. }
  B:
    type: final
    on:
      go: { target: A, reenter: true }
      other: A
    always: A
  C:
    entry: { type: prompt, params: { text: a, file: b.md } }
    on:
      go: A
  E:
    on:
      go: A
"""


def test_broken_parts_give_no_second_finding(tmp_path: Path) -> None:
    """A final state's on and always are MCH-6's (no MCH-14, AGT-3 or MCH-16 there); a target
    that names no state is MCH-2's (no MCH-16: it may be a typo of A); a malformed entry prompt
    is MCH-10's (no AGT-5, and C's implied prompt isn't read); E's implied prompt still is."""
    (tmp_path / "enter-C.md").write_text("Hi </smllm>\n")
    (tmp_path / "enter-E.md").write_text("Hi </smllm>\n")
    assert findings(tmp_path, FINAL) == [
        "m.smllm.yaml:10:21: error: states.A.on.go.target: no state named AA (MCH-2)",
        "m.smllm.yaml:15:7: error: states.B.on: final state B can't have on (MCH-6)",
        "m.smllm.yaml:17:13: error: states.B.always: final state B can't have always (MCH-6)",
        "m.smllm.yaml:19:36: error: states.C.entry.params: a prompt needs exactly one of text "
        "or file (MCH-10)",
        "m.smllm.yaml:22:3: warning: states.E: prompt text contains </smllm>, which would close "
        "smllm's block (AGT-1)",
    ]


SHARED_AND_HOST = """\
id: s
initial: A
meta:
  smllm: 1
  events: { go: { description: Go on., source: host } }
  sharedActions:
    - states: [X]
      entry: { type: prompt, params: { text: Go. } }
states:
  A:
    on:
      go: B
      pause: B
  B:
    type: final
"""


def test_a_broken_shared_entry_and_a_built_in_in_on(tmp_path: Path) -> None:
    """A sharedActions error may hide the prompt a state lacks (X may be a typo of A: no AGT-5
    anywhere); a built-in in `on` (EVT-5) is left out of the machine, and renamed it may be an
    agent event (no EVT-12)."""
    assert findings(tmp_path, SHARED_AND_HOST) == [
        "m.smllm.yaml:7:16: error: meta.sharedActions[0].states[0]: no state named X (MCH-12)",
        "m.smllm.yaml:13:7: error: states.A.on.pause: pause is a built-in event (EVT-5)",
    ]
    fixed = SHARED_AND_HOST.replace("[X]", "[B]").replace("      pause: B\n", "")
    assert findings(tmp_path, fixed) == [
        "m.smllm.yaml:1:5: info: id: only the host can drive s; agents can't enter it (EVT-12)",
        "m.smllm.yaml:10:3: info: states.A: the agent gets no instructions in A (AGT-5)",
    ]
