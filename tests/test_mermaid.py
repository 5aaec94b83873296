"""`smllm graph --mermaid` checked by Mermaid's own parser (tests/mermaid/check.mjs, under Node).

Every example machine, and machines with tricky names, must parse as a stateDiagram-v2 whose
states and edges are the machine's. Needs `node` and `npm ci --prefix tests/mermaid` (scripts/test
installs both); the tests that run the checker fail without them, saying so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ALL, require_tool, write_machine

CHECKER = Path(__file__).resolve().parent / "mermaid"

Result = dict[str, Any]  # one line of check.mjs's output
Checked = dict[str, tuple[dict[str, Any], str, Result]]  # case → (machine, diagram, result)


def check(diagrams: list[str]) -> tuple[int, list[Result]]:
    """Every diagram through Mermaid's parser in one Node process: the exit code and results."""
    node = require_tool("node", "apt-get install nodejs npm (Node 20 or newer)")
    if not (CHECKER / "node_modules" / "mermaid" / "package.json").is_file():
        pytest.fail(
            "needs Mermaid's pinned npm packages: npm ci --prefix tests/mermaid"
            " (scripts/test installs them)"
        )
    proc = subprocess.run(
        [node, str(CHECKER / "check.mjs")],
        input=json.dumps(diagrams),
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(diagrams), proc.stderr
    return proc.returncode, results


def drawn(result: Result) -> list[tuple[str, str, str]]:
    """The edges Mermaid understood, by the names it shows (`[*]` for start and end)."""
    names = {
        node_id: "[*]" if shape in ("stateStart", "stateEnd") else label
        for node_id, shape, label in result["nodes"]
    }
    return [(names[a], names[b], label) for a, b, label in result["edges"]]


def marks(t: dict[str, Any]) -> str:
    """What `graph` adds to an edge's label after the event and guard."""
    host = bool(t["event"] != "always" and t["source"] == "host")
    return " (reenter)" * bool(t["reenter"]) + " (setRef)" * bool(t["setRef"]) + " (host)" * host


def expected(machine: dict[str, Any]) -> list[tuple[str, str, re.Pattern[str]]]:
    """The machine's edges from `graph --json`, each label as a pattern: exact, but for a
    guard's text, which is trimmed for Mermaid (`EVENT [GUARD] MARKS`)."""
    exact = re.compile("")
    out = [("[*]", machine["initial"], exact)]
    for state in machine["states"]:
        for t in state["transitions"]:
            guard = r" \[.*\]" if t["guard"] else ""
            label = re.compile(re.escape(t["event"]) + guard + re.escape(marks(t)))
            out.append((state["name"], t["target"] or state["name"], label))
    out += [(s["name"], "[*]", exact) for s in machine["states"] if s["final"]]
    return out


def state_label(state: dict[str, Any]) -> str:
    """A state's box: its name, and the marks that [*] doesn't show."""
    tags = ["entry point"] * bool(state["entryPoint"]) + ["fallback"] * bool(state["fallback"])
    name: str = state["name"]
    return name + (f" [{', '.join(tags)}]" if tags else "")


def assert_matches(result: Result, machine: dict[str, Any], diagram: str) -> None:
    """A valid stateDiagram-v2 that draws exactly the machine's edges."""
    where = f"{machine['id']}:\n{diagram}"
    assert result["ok"], f"{result['error']}\n{where}"
    assert result["diagramType"] == "stateDiagram", where
    assert "\nstateDiagram-v2\n" in diagram, where
    want = expected(machine)
    got = drawn(result)
    assert len(got) == len(want), where
    labels = {s["name"]: state_label(s) for s in machine["states"]}
    for (a, b, label), (wa, wb, wlabel) in zip(got, want, strict=True):
        assert (a, b) == (labels.get(wa, wa), labels.get(wb, wb)), where
        assert wlabel.fullmatch(label), f"{label!r} !~ {wlabel.pattern!r}\n{where}"
    # every state drawn (those without edges too), and none made up from a stray line
    states = set(labels.values())
    assert {label for _, shape, label in result["nodes"] if shape == "rect"} == states, where


def graph(args: list[str], folder: Path, env: dict[str, str]) -> str:
    """`smllm graph ARGS`'s stdout exactly: no newline translation (a `\r` stays one)."""
    proc = subprocess.run(
        [sys.executable, "-m", "smllm", "graph", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, b""), args
    return proc.stdout.decode()


def graphs(folder: Path, env: dict[str, str], one_by_one: bool) -> list[tuple[dict[str, Any], str]]:
    """(machine from `graph --json`, its Mermaid diagram) for every configured machine: from
    `graph ID --mermaid` one by one, or split from one `graph --mermaid` (faster)."""
    machines = json.loads(graph(["--json"], folder, env))["machines"]
    if one_by_one:
        diagrams = [graph([m["id"], "--mermaid"], folder, env) for m in machines]
    else:
        out = graph(["--mermaid"], folder, env).removesuffix("\n")
        diagrams = [d + "\n" for d in re.split(r"\n\n(?=---\n)", out)]
    assert len(diagrams) == len(machines)
    return list(zip(machines, diagrams, strict=True))


def test_every_machine_is_a_valid_state_diagram(every_machine: Path, env: dict[str, str]) -> None:
    pairs = graphs(every_machine, env, one_by_one=True)
    assert [m["id"] for m, _ in pairs] == ["dev", *ALL]
    code, results = check([diagram for _, diagram in pairs])
    for (machine, diagram), result in zip(pairs, results, strict=True):
        assert_matches(result, machine, diagram)
    assert code == 0


# Written out from the machine files (tests/machines, the dev example), not from `graph --json`:
# Mermaid's edges (`[*]` for start and end), each label `EVENT [GUARD] (reenter) (setRef)
# (host)` with the guard's text as graph.py cleans it for Mermaid (no `"`, `:`, `;`, `#`, or
# backtick), and every state's box.
EP = " [entry point]"
FIXTURES: dict[str, tuple[list[tuple[str, str, str]], set[str]]] = {
    "dev": (
        [
            ("[*]", f"PLAN{EP}", ""),
            (f"PLAN{EP}", "WORK", "planned [command test -f PLAN.md]"),
            (f"PLAN{EP}", f"PLAN{EP}", "planned (reenter)"),
            ("WORK", "DONE", "done"),
            ("DONE", "[*]", ""),
        ],
        {f"PLAN{EP}", "WORK", "DONE"},
    ),
    "always": (
        [
            ("[*]", f"START{EP}", ""),
            (f"START{EP}", "ROUTE", "go"),
            ("ROUTE", "THIRD", "always [visits ROUTE ≥ 3]"),
            ("ROUTE", "HOP", "always"),
            ("HOP", "END_OR_BACK", "always"),
            ("END_OR_BACK", f"START{EP}", "back"),
            ("END_OR_BACK", "THIRD", "go"),
            ("THIRD", "[*]", ""),
        ],
        {f"START{EP}", "ROUTE", "HOP", "END_OR_BACK", "THIRD"},
    ),
    "fallback": (
        [
            ("[*]", f"WORK{EP}", ""),
            (f"WORK{EP}", "DONE", "done"),
            ("ASIDE [fallback]", f"WORK{EP}", "handled"),
            ("DONE", "[*]", ""),
        ],
        {f"WORK{EP}", "ASIDE [fallback]", "DONE"},
    ),
    "final": (
        [
            ("[*]", f"OPEN{EP}", ""),
            (f"OPEN{EP}", "CLOSED", "close"),
            (f"REVIEW{EP}", "CLOSED", "close"),
            ("CLOSED", "[*]", ""),
        ],
        {f"OPEN{EP}", f"REVIEW{EP}", "CLOSED"},
    ),
    "reenter": (
        [
            ("[*]", f"A{EP}", ""),
            (f"A{EP}", f"A{EP}", "again (reenter)"),
            (f"A{EP}", f"A{EP}", "stay"),
            (f"A{EP}", f"A{EP}", "note"),  # targetless: drawn as a self edge
            (f"A{EP}", f"B{EP}", "next"),
            (f"B{EP}", f"A{EP}", "next"),
            (f"B{EP}", "DONE", "finish"),
            ("DONE", "[*]", ""),
        ],
        {f"A{EP}", f"B{EP}", "DONE"},
    ),
    "visits": (
        [
            ("[*]", f"TRY{EP}", ""),
            (f"TRY{EP}", "GIVE_UP", "retry [visits TRY ≥ 2]"),
            (f"TRY{EP}", f"TRY{EP}", "retry (reenter)"),
            ("GIVE_UP", "[*]", ""),
        ],
        {f"TRY{EP}", "GIVE_UP"},
    ),
    "fix": (
        [
            ("[*]", f"TRIAGE{EP}", ""),
            (f"TRIAGE{EP}", f"REPRO{EP}", "triaged (setRef)"),
            (f"REPRO{EP}", "FIX", "reproduced [command ! test -f $SMLLM_PARAM_TEST]"),
            (f"REPRO{EP}", f"REPRO{EP}", "reproduced (reenter)"),
            ("FIX", "CHECK", "fixed"),
            ("FIX", "FIX", "progress"),
            ("CHECK", "STUCK", "always [visits FIX ≥ 3]"),
            ("CHECK", "REVIEW", "always"),
            ("STUCK", "FIX", "retry"),
            ("REVIEW", "SHIP", "approved (host)"),
            ("REVIEW", "FIX", "changesRequested (host)"),
            ("SHIP", "[*]", ""),
        ],
        {
            f"TRIAGE{EP}",
            f"REPRO{EP}",
            "FIX",
            "CHECK",
            "STUCK",
            "REVIEW",
            "ASIDE [fallback]",
            "SHIP",
        },
    ),
}


def test_the_fixture_machines_draw_the_written_edges(
    every_machine: Path, env: dict[str, str]
) -> None:
    out = graph(["--mermaid"], every_machine, env).removesuffix("\n")
    diagrams = [d + "\n" for d in re.split(r"\n\n(?=---\n)", out)]
    assert len(diagrams) == len(FIXTURES)
    code, results = check(diagrams)
    assert code == 0
    for (mid, (edges, boxes)), diagram, result in zip(
        FIXTURES.items(), diagrams, results, strict=True
    ):
        assert result["ok"], f"{result['error']}\n{diagram}"
        assert diagram.startswith(f'---\ntitle: "{mid}"\n---\nstateDiagram-v2\n'), diagram
        assert drawn(result) == edges, f"{mid}:\n{diagram}"
        assert {label for _, shape, label in result["nodes"] if shape == "rect"} == boxes, mid


def test_the_checker_rejects_broken_diagrams() -> None:
    good = "stateDiagram-v2\n    [*] --> A\n    A --> B : go [command x]\n    B --> [*]\n"
    broken = [
        "stateDiagram-v2\n    [*] --> A\n    A --> --> B : go\n",  # two arrows
        "stateDiagram-v2\n    [*] --> A\n    A --> B : go :: x\n",  # `::` in a label
        "stateDiagram-v2\n    [*] --> note\n",  # a keyword as a state
        "---\ntitle: -\n---\nstateDiagram-v2\n    [*] --> A\n",  # front matter that isn't YAML
        "flowchart LR\n    A --> B\n",  # another diagram type
        "not a diagram\n",
    ]
    code, results = check([good, *broken])
    assert code == 1
    assert results[0]["ok"], results[0]["error"]
    assert drawn(results[0]) == [("[*]", "A", ""), ("A", "B", "go [command x]"), ("B", "[*]", "")]
    for text, result in zip(broken, results[1:], strict=True):
        assert not result["ok"], text
        assert result["error"], text
    assert "Parse error" in results[1]["error"]
    assert results[5]["diagramType"] == "flowchart-v2"


# Machines with names and guards at the edges of machine-format.md §2.1: a state S entered first,
# `S --EVENT [guard]--> DONE`, `S --EVENT--> S`, DONE final. Each case is one machine (its id is
# the case's); all are checked together, in one project, one `graph --json` and one Node run.
def tricky(state: str = "S", event: str = "go", run: str | list[str] = "true") -> dict[str, Any]:
    return {"state": state, "event": event, "run": run}


def tricky_yaml(mid: str, state: str, event: str, run: str | list[str]) -> str:
    s, e = json.dumps(state), json.dumps(event)
    return f"""\
id: {json.dumps(mid)}
initial: {s}
meta:
  smllm: 1
  events:
    {e}: {{ description: Go. }}
states:
  {s}:
    meta: {{ entryPoint: true }}
    entry: {{ type: prompt, params: {{ text: "Go on." }} }}
    on:
      {e}:
        - {{ target: DONE, guard: {{ type: command, params: {{ run: {json.dumps(run)} }} }} }}
        - target: {s}
  DONE:
    type: final
"""


KEYWORDS = "state note Note class classDef style click href default scale stateDiagram"
TRICKY: dict[str, dict[str, Any]] = {
    "state-end": tricky(state="end"),
    "state-1": tricky(state="1"),
    "state-direction": tricky(state="direction"),
    "state-fork": tricky(state="fork"),
    "event-a.b-c": tricky(event="a.b-c"),
    "event-_x.y_z": tricky(event="_x.y_z"),
    "guard-punctuation": tricky(run="""test "$X" = 'a:b;c#d' && echo `{x}` <y> %% [z] :: &"""),
    "guard-list": tricky(run=["gh", "pr", "--fill", "a:b", '"q"']),
    "-x": tricky(),  # the machine id is the title
    # found invalid, or drawn wrong, by Mermaid 11's parser before graph.py gave every state
    # an id and a label, cleaned labels, and quoted the title:
    "state-a-b": tricky(state="a-b"),
    "state--": tricky(state="-"),
    **{f"state-{name}": tricky(state=name) for name in [*KEYWORDS.split(), "accTitle", "accDescr"]},
    "state-root_start": tricky(state="root_start"),
    "state-root_end": tricky(state="root_end"),
    "guard-direction-LR": tricky(run="sort --direction LR"),
    "guard-newline-error": tricky(run="true\n-f x"),
    "guard-newline-state": tricky(run="true\nfalse"),
    "guard-carriage-return": tricky(run="true\rfalse"),
    "-": tricky(),
}


@pytest.fixture(scope="module")
def tricky_results(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    """Case → (machine from `graph --json`, its `--mermaid` diagram, Mermaid's result)."""
    base = tmp_path_factory.mktemp("tricky")
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(base / "xdg-state"),
        "XDG_CACHE_HOME": str(base / "xdg-cache"),
        "XDG_CONFIG_HOME": str(base / "xdg-config"),
        "HOME": str(base / "home"),
    }
    env.pop("SMLLM_CONFIG", None)
    ids = [re.sub(r"[^A-Za-z0-9_-]", "_", case) for case in TRICKY]  # the case, as a machine id
    # ids that differ only in case are an error (CFG-5): the later one gets a suffix
    ids = [
        f"{mid}_{n}" if mid.lower() in map(str.lower, ids[:n]) else mid for n, mid in enumerate(ids)
    ]
    for n, (mid, spec) in enumerate(zip(ids, TRICKY.values(), strict=True)):
        write_machine(base, f"case{n}", tricky_yaml(mid, **spec))
    pairs = graphs(base, env, one_by_one=False)
    assert [m["id"] for m, _ in pairs] == ids
    _, results = check([diagram for _, diagram in pairs])
    return {case: (m, d, r) for case, (m, d), r in zip(TRICKY, pairs, results, strict=True)}


#: the guard's text in the guarded edge's label, written out: `true` where the case doesn't say
GUARD_TEXT = {
    "guard-punctuation": "test $X = 'abcd' && echo {x} <y> % [z]  &",
    "guard-list": "[gh, pr, --fill, ab, q]",
    "guard-direction-LR": "sort --direction_LR",
    "guard-newline-error": "true -f x",
    "guard-newline-state": "true false",
    "guard-carriage-return": "true false",
}


@pytest.mark.parametrize("case", [pytest.param(case, id=case) for case in TRICKY])
def test_tricky_names(case: str, tricky_results: Checked) -> None:
    machine, diagram, result = tricky_results[case]
    assert_matches(result, machine, diagram)
    spec = TRICKY[case]
    box = spec["state"] + EP
    guarded = f"{spec['event']} [command {GUARD_TEXT.get(case, 'true')}]"
    assert drawn(result) == [
        ("[*]", box, ""),
        (box, "DONE", guarded),
        (box, box, spec["event"]),
        ("DONE", "[*]", ""),
    ], diagram
