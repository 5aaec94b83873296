"""`smllm graph`: text, JSON, DOT that Graphviz renders, and Mermaid stateDiagram-v2."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import ALL, require_tool, smllm


def test_text(every_machine: Path, env: dict[str, str]) -> None:
    ran = smllm(["graph", "dev"], every_machine, env)
    assert (ran.code, ran.err) == (0, "")
    assert ran.out == (
        "dev: Work on an issue, from a plan to a change.\n"
        "PLAN [initial, entry point]\n"
        "  planned [command `test -f PLAN.md`] → WORK\n"
        "  planned → PLAN (reenter)\n"
        "WORK\n"
        "  done → DONE\n"
        "DONE [final]\n"
    )
    fix = smllm(["graph", "fix"], every_machine, env).out
    for line in (
        "  triaged → REPRO (setRef)",
        "  progress → (stays)",
        "  always [visits FIX ≥ 3] → STUCK",
        "  approved → SHIP (host)",
        "ASIDE [fallback]",
        "SHIP [final]",
    ):
        assert line + "\n" in fix
    everything = smllm(["graph"], every_machine, env).out
    assert everything.count("\n\n") == len(ALL)  # machines separated by a blank line
    missing = smllm(["graph", "nope"], every_machine, env)
    assert (missing.code, missing.err) == (1, "error: no machine nope is configured\n")


def test_a_machine_with_errors_is_named(project: Path, env: dict[str, str]) -> None:
    dev = project / ".smllm" / "dev.smllm.yaml"
    dev.write_text(dev.read_text().replace("initial: PLAN", "initial: NOPE"))
    ran = smllm(["graph", "dev"], project, env)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == (
        "error: no machine dev is configured (with errors: .smllm/dev.smllm.yaml; see smllm "
        "validate)\n"
    )


def test_json(every_machine: Path, env: dict[str, str]) -> None:
    data = json.loads(smllm(["graph", "--json"], every_machine, env).out)
    assert [m["id"] for m in data["machines"]] == ["dev", *ALL]
    fix = data["machines"][-1]
    review = next(s for s in fix["states"] if s["name"] == "REVIEW")
    assert review["transitions"][0] == {
        "event": "approved",
        "target": "SHIP",
        "guard": None,
        "reenter": False,
        "setRef": False,
        "source": "host",
    }


def test_dot_of_the_seed_machine(every_machine: Path, env: dict[str, str]) -> None:
    assert smllm(["graph", "dev", "--dot"], every_machine, env).out == (
        'digraph "dev" {\n'
        "  rankdir=LR;\n"
        "  node [shape=box, style=rounded];\n"
        '  "__start" [shape=point];\n'
        '  "__start" -> "PLAN";\n'
        '  "PLAN" [label="PLAN\\n[initial, entry point]"];\n'
        '  "WORK" [label="WORK"];\n'
        '  "DONE" [label="DONE\\n[final]", peripheries=2];\n'
        '  "PLAN" -> "WORK" [label="planned [command `test -f PLAN.md`]"];\n'
        '  "PLAN" -> "PLAN" [label="planned (reenter)"];\n'
        '  "WORK" -> "DONE" [label="done"];\n'
        "}\n"
    )
    # setRef and host-only events are marked as in the text form
    fix = smllm(["graph", "fix", "--dot"], every_machine, env).out
    assert '"TRIAGE" -> "REPRO" [label="triaged (setRef)"];' in fix
    assert '[label="approved (host)"];' in fix


def test_dot_renders_with_graphviz(every_machine: Path, env: dict[str, str]) -> None:
    dot = require_tool("dot", "apt-get install graphviz")
    for name in ["dev", *ALL]:
        ran = smllm(["graph", name, "--dot"], every_machine, env)
        svg = subprocess.run([dot, "-Tsvg"], input=ran.out, capture_output=True, text=True)
        assert (svg.returncode, svg.stderr) == (0, ""), name
        assert "<svg" in svg.stdout


MERMAID_LINE = re.compile(
    r"    (\[\*\]|s[0-9]+) --> (\[\*\]|s[0-9]+)( : [^\"`:;#\x00-\x1f]+)?"
    r"|    state \"[A-Za-z0-9_-]+( \[(entry point|fallback|entry point, fallback)\])?\" as s[0-9]+"
)


def test_mermaid_is_a_state_diagram(every_machine: Path, env: dict[str, str]) -> None:
    """The exact diagram of the seed's machine, and the shape of every other one (Mermaid's
    own parser reads them all in test_mermaid.py)."""
    dev = smllm(["graph", "dev", "--mermaid"], every_machine, env).out
    assert dev == (
        '---\ntitle: "dev"\n---\nstateDiagram-v2\n'
        '    state "PLAN [entry point]" as s0\n    state "WORK" as s1\n    state "DONE" as s2\n'
        "    [*] --> s0\n"
        "    s0 --> s1 : planned [command test -f PLAN.md]\n"
        "    s0 --> s0 : planned (reenter)\n"
        "    s1 --> s2 : done\n"
        "    s2 --> [*]\n"
    )
    for name in ALL:
        lines = smllm(["graph", name, "--mermaid"], every_machine, env).out.splitlines()
        assert lines[:4] == ["---", f'title: "{name}"', "---", "stateDiagram-v2"]
        for line in lines[4:]:
            assert MERMAID_LINE.fullmatch(line), line
