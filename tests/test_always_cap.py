"""The bound on `always` steps in one call (machine-format.md §3 step 4; issue 12 §1.2): a chain
of N `always` states after the event's target is followed to its end for N ≤ 32, and stopped
after exactly 32 transitions for N > 32, with a message, an arrival and a history trace that
all count the transitions actually taken.

Validation can't stop a chain (only a cycle is MCH-4), so a long one is a valid machine and
the bound is reachable: a chain of 31, 32, 33 and 34 states checks it at, below and above it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import smllm, write_machine

from smllm.engine.steps import MAX_ALWAYS_STEPS

CAP = 32  # the spec's number, written out: the constant must say the same
STOPPED = f"Stopped after {CAP} always transitions; check for a loop"


def chain(n: int) -> str:
    """START --go--> A0 -always-> A1 … A(n-1) -always-> END: n always transitions to END."""
    states = "".join(
        f"  A{i}:\n    always: {f'A{i + 1}' if i + 1 < n else 'END'}\n" for i in range(n)
    )
    return f"""\
id: chain
description: A chain of {n} always states.
initial: START
meta:
  smllm: 1
  events:
    go: {{ description: Go down the chain. }}
states:
  START:
    meta: {{ entryPoint: true }}
    entry: {{ type: prompt, params: {{ text: "Fire go." }} }}
    on:
      go: A0
{states}  END:
    entry: {{ type: prompt, params: {{ text: "At the end." }} }}
    on:
      go: START
"""


def test_the_constant_is_the_specs() -> None:
    assert MAX_ALWAYS_STEPS == CAP


@pytest.mark.parametrize("n", [1, CAP - 1, CAP, CAP + 1, CAP + 2])
def test_a_chain_of_always_states(project: Path, env: dict[str, str], n: int) -> None:
    write_machine(project, "chain", chain(n))
    ran = smllm(["validate"], project, env)
    assert ran.code == 0 and ran.out.startswith("0 errors, 0 warnings"), ran.out
    ran = smllm(["fire", "enter", "--param", "stateMachine=chain", "--json"], project, env)
    assert ran.code == 0, ran.out
    key = json.loads(ran.out)["session"]
    ran = smllm(["fire", "--session", key, "go"], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out
    lines = ran.out.split("\n")
    taken = min(n, CAP)  # always transitions taken
    passed = [f"A{i}" for i in range(taken)]  # the states they left
    rest = "END" if n <= CAP else f"A{CAP}"
    label = lines[1].split(" · ")
    assert label[1] == f"chain › {rest}", ran.out
    assert lines[2] == f"Arrived by: go from START via {', '.join(passed)}", ran.out
    if n <= CAP:
        assert STOPPED not in ran.out and "Stopped after" not in ran.out, ran.out
        assert lines[3:6] == ["<instructions>", "At the end.", "</instructions>"], ran.out
    else:
        # the message counts the transitions taken: one per state passed through
        assert lines[3] == STOPPED, ran.out
        assert int(lines[3].split()[2]) == len(passed)
    # the history record: to, the arrival, one `Passed through` per transition, the stop line
    instance = label[2].split()[1]
    shown = smllm(["instance", "show", instance, "--json"], project, env)
    record = json.loads(shown.out)["history"][-1]
    assert (record["from"], record["to"], record["event"]) == ("START", rest, "go")
    assert record["arrival"] == lines[2].removeprefix("Arrived by: ")
    want = [f"Passed through: {s}" for s in passed] + ([STOPPED] if n > CAP else [])
    assert record["trace"] == want
