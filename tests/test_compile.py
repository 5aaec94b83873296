"""`smllm compile`: the normal form of machine-format.md §5, byte-identical wherever it runs,
read back by the loader as the same machine (the transcript test replays it too)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import MACHINES, ROOT, smllm
from helpers.machine_meaning import meaning

from smllm.machine.loader.load import load_machine_file
from smllm.machine.model import Machine

EXAMPLE = ROOT.parent / "src" / "smllm" / "examples" / "dev" / "dev.smllm.yaml"
GOLDEN = ROOT / "golden" / "fix.compiled.json"
EVERY = [*sorted(MACHINES.glob("*.smllm.yaml")), MACHINES / "fix" / "fix.smllm.yaml", EXAMPLE]


def _load(path: Path) -> Machine:
    result = load_machine_file(str(path), str(path))
    assert result.machine is not None, [f.text() for f in result.findings]
    assert result.findings == []
    return result.machine


def test_golden(tmp_path: Path, env: dict[str, str]) -> None:
    shutil.copytree(MACHINES / "fix", tmp_path / "fix")
    ran = smllm(["compile", "fix/fix.smllm.yaml"], tmp_path, env)
    assert (ran.code, ran.err) == (0, "")
    if os.environ.get("SMLLM_UPDATE_SNAPSHOTS"):
        GOLDEN.write_text(ran.out)
    assert ran.out == GOLDEN.read_text()
    assert ran.out.count("\n") == 1  # compact: one line
    # prompt files and the implied enter-REPRO.md are inlined; cwd is relative to the output
    assert '"params":{"file"' not in ran.out
    assert (MACHINES / "fix" / "enter-REPRO.md").read_text().strip().split("\n")[0] in ran.out
    assert '"cwd":"."' in ran.out  # fix/.. seen from the current folder


@pytest.mark.parametrize("source", EVERY, ids=lambda p: p.name)
def test_read_back_as_the_same_machine(source: Path, tmp_path: Path, env: dict[str, str]) -> None:
    here = tmp_path / "in"
    shutil.copytree(source.parent, here)
    out = tmp_path / "elsewhere" / "deeper" / "m.json"
    out.parent.mkdir(parents=True)
    ran = smllm(["compile", str(here / source.name), "-o", str(out)], tmp_path, env)
    assert (ran.code, ran.out, ran.err) == (0, "", "")
    assert meaning(_load(out)) == meaning(_load(here / source.name))
    # compiling the normal form again changes nothing
    again = tmp_path / "elsewhere" / "deeper" / "m2.json"
    assert smllm(["compile", str(out), "-o", str(again)], tmp_path, env).code == 0
    assert again.read_bytes() == out.read_bytes()


def test_same_bytes_wherever_it_runs(tmp_path: Path, env: dict[str, str]) -> None:
    outputs = set()
    for place in ("a", "b/c/d"):
        folder = tmp_path / place
        shutil.copytree(MACHINES / "fix", folder / "fix")
        ran = smllm(["compile", "fix/fix.smllm.yaml"], folder, env)
        assert ran.code == 0
        outputs.add(ran.out)
        ran = smllm(["compile", "fix/fix.smllm.yaml", "-o", "out.json"], folder, env)
        outputs.add((folder / "out.json").read_text())
    assert len(outputs) == 1


HOSTILE = """\
id: odd
initial: A
meta: { smllm: 1 }
states:
  A:
    entry:
      - type: prompt
        params: { text: "line\\u2028sep\\u0085nel \\x7f del \\"q\\" back\\\\slash ☃ 😀" }
      - { type: command, params: { run: "echo \\"$SMLLM_REF\\"", cwd: "/", timeoutSecs: 2.5 } }
    on:
      go: { target: B, description: "Go: {now}; # not a comment" }
  B: { type: final }
"""


def test_text_yaml_cannot_read_raw_is_escaped(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "odd.smllm.yaml").write_text(HOSTILE)
    ran = smllm(["compile", "odd.smllm.yaml", "-o", "odd.json"], tmp_path, env)
    assert (ran.code, ran.err) == (0, "")
    raw = (tmp_path / "odd.json").read_text()
    for escaped in ("\\u2028", "\\u0085", "\\u007f"):
        assert escaped in raw
    assert meaning(_load(tmp_path / "odd.json")) == meaning(_load(tmp_path / "odd.smllm.yaml"))
    assert '"timeoutSecs":2.5' in raw and '"cwd":"/"' in raw


def test_implied_prompt_with_crlf_is_inlined(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "m.smllm.yaml").write_text(
        "id: m\ninitial: A\nmeta: { smllm: 1 }\n"
        "states:\n  A:\n    on: { go: { target: B, description: Go. } }\n  B: { type: final }\n"
    )
    (tmp_path / "enter-A.md").write_bytes(b"Do it.\r\nThen\rmore.\r\n\r\n")
    ran = smllm(["compile", "m.smllm.yaml"], tmp_path, env)
    assert ran.out == (
        '{"id":"m","initial":"A","meta":{"smllm":1,"instance":{"kind":"instance","ref":'
        '{"param":"ref"}}},"states":{"A":{"meta":{"entryPoint":false,"fallback":false},'
        '"entry":[{"type":"prompt","params":{"text":"Do it.\\nThen\\rmore."}}],'
        '"on":{"go":[{"target":"B","reenter":false,"description":"Go."}]}},'
        '"B":{"type":"final","meta":{"entryPoint":false,"fallback":false}}}}\n'
    )


def test_errors_write_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "bad.smllm.yaml").write_text(
        "id: bad\ninitial: A\nmeta: { smllm: 1 }\nstates:\n  A:\n    on: { go: NOWHERE }\n"
    )
    (tmp_path / "out.json").write_text("kept\n")
    ran = smllm(["compile", "bad.smllm.yaml", "-o", "out.json"], tmp_path, env)
    assert (ran.code, ran.out) == (1, "")
    # validate's findings, warnings beside the error (validation.md §1), info left out
    assert ran.err == (
        "bad.smllm.yaml:6:11: warning: states.A.on.go: go has no description in A (AGT-3)\n"
        "  hint: add a description, so the agent knows when to fire it\n"
        "bad.smllm.yaml:6:15: error: states.A.on.go: no state named NOWHERE (MCH-2)\n"
        "  hint: name one of: A\n"
    )
    assert (tmp_path / "out.json").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.smllm.yaml", "out.json"]
    missing = smllm(["compile", "nope.yaml"], tmp_path, env)
    assert (missing.code, missing.out, missing.err) == (2, "", "error: no file nope.yaml\n")
    folder = smllm(["compile", "."], tmp_path, env)
    assert (folder.code, folder.out, folder.err) == (
        2,
        "",
        "error: . is a folder, not a machine file\n",
    )
