"""`smllm validate`: findings at file:line:col, the counts line, JSON, exit codes
(validation.md §3). The full rule set with one fixture per rule is issue 3's."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import MACHINES, smllm

EXAMPLE = Path(__file__).parent.parent / "src" / "smllm" / "examples" / "dev" / "dev.smllm.yaml"

BAD = """\
id: bad
initial: PLAN
meta:
  smllm: 1
  events:
    reviewed: { description: Reviewed. }
    go: {}
states:
  PLAN:
    on:
      go: WROK
  LOST: {}
"""


def test_every_machine_of_the_test_suite_has_no_finding(
    tmp_path: Path, env: dict[str, str]
) -> None:
    for path in [*sorted(MACHINES.rglob("*.smllm.yaml")), EXAMPLE]:
        ran = smllm(["validate", "--info", str(path)], tmp_path, env)
        assert (ran.code, ran.out, ran.err) == (0, "0 errors, 0 warnings, 0 info\n", ""), path


def test_findings_of_a_config(project: Path, env: dict[str, str]) -> None:
    (project / ".smllm" / "bad.smllm.yaml").write_text(BAD)
    (project / ".smllm" / "config.toml").write_text(
        '[machines]\nfiles = ["dev.smllm.yaml", "bad.smllm.yaml"]\n'
    )
    ran = smllm(["validate", "--info"], project, env)
    assert ran.code == 1
    # every finding at once (validation.md §1), but MCH-13: with a target missing, which
    # states the fix reaches is a guess
    assert ran.out == (
        ".smllm/bad.smllm.yaml:6:5: warning: meta.events.reviewed: no state uses reviewed "
        "(EVT-10)\n"
        "  hint: use it in a state's on, or remove it\n"
        ".smllm/bad.smllm.yaml:8:1: info: states: no final state: instances never complete "
        "(MCH-18)\n"
        "  hint: add a state with type: final if the work can end\n"
        ".smllm/bad.smllm.yaml:9:3: info: states.PLAN: the agent gets no instructions in PLAN "
        "(AGT-5)\n"
        "  hint: add a prompt action or enter-STATE.md\n"
        ".smllm/bad.smllm.yaml:11:7: warning: states.PLAN.on.go: go has no description in PLAN "
        "(AGT-3)\n"
        "  hint: add a description, so the agent knows when to fire it\n"
        ".smllm/bad.smllm.yaml:11:11: error: states.PLAN.on.go: no state named WROK (MCH-2)\n"
        "  hint: name one of: PLAN, LOST\n"
        ".smllm/bad.smllm.yaml:12:3: info: states.LOST: the agent gets no instructions in LOST "
        "(AGT-5)\n"
        "  hint: add a prompt action or enter-STATE.md\n"
        "1 error, 2 warnings, 3 info\n"
    )
    path = project / ".smllm" / "bad.smllm.yaml"
    path.write_text(BAD.replace("WROK", "PLAN"))
    ran = smllm(["validate", "--info"], project, env)
    assert ran.code == 0
    assert ran.out == (
        ".smllm/bad.smllm.yaml:6:5: warning: meta.events.reviewed: no state uses reviewed "
        "(EVT-10)\n"
        "  hint: use it in a state's on, or remove it\n"
        ".smllm/bad.smllm.yaml:8:1: info: states: no final state: instances never complete "
        "(MCH-18)\n"
        "  hint: add a state with type: final if the work can end\n"
        ".smllm/bad.smllm.yaml:9:3: info: states.PLAN: the agent gets no instructions in PLAN "
        "(AGT-5)\n"
        "  hint: add a prompt action or enter-STATE.md\n"
        ".smllm/bad.smllm.yaml:11:7: warning: states.PLAN.on.go: go has no description in PLAN "
        "(AGT-3)\n"
        "  hint: add a description, so the agent knows when to fire it\n"
        ".smllm/bad.smllm.yaml:12:3: info: states.LOST: the agent gets no instructions in LOST "
        "(AGT-5)\n"
        "  hint: add a prompt action or enter-STATE.md\n"
        ".smllm/bad.smllm.yaml:12:3: warning: states.LOST: LOST can't be reached (MCH-13)\n"
        "  hint: add a transition to it, mark it meta.entryPoint, or remove it\n"
        "0 errors, 3 warnings, 3 info\n"
    )
    without_info = smllm(["validate"], project, env).out
    assert "(MCH-18)" not in without_info and without_info.endswith(
        "0 errors, 3 warnings, 3 info\n"
    )
    data = json.loads(smllm(["validate", "--json"], project, env).out)
    assert data["ok"] is True
    assert data["files"] == [".smllm/config.toml", ".smllm/dev.smllm.yaml", ".smllm/bad.smllm.yaml"]
    assert data["counts"] == {"error": 0, "warning": 3, "info": 3}
    assert data["findings"][0] == {
        "rule": "EVT-10",
        "level": "warning",
        "file": ".smllm/bad.smllm.yaml",
        "line": 6,
        "column": 5,
        "path": "meta.events.reviewed",
        "message": "no state uses reviewed",
        "hint": "use it in a state's on, or remove it",
    }


WARNED = """\
id: warned
initial: A
meta:
  smllm: 1
states:
  A:
    entry: { type: prompt, params: { text: Go. } }
    on:
      go: { target: B, description: Go on. }
  B:
    type: final
  C:
    type: final
"""


def test_warnings_fail_the_run_and_ok_says_so(tmp_path: Path, env: dict[str, str]) -> None:
    """--warnings: a warning exits 1, and --json's `ok` agrees with the exit code."""
    (tmp_path / "warned.smllm.yaml").write_text(WARNED)
    plain = smllm(["validate", "--json", "warned.smllm.yaml"], tmp_path, env)
    strict = smllm(["validate", "--json", "--warnings", "warned.smllm.yaml"], tmp_path, env)
    assert (plain.code, json.loads(plain.out)["ok"]) == (0, True)
    assert (strict.code, json.loads(strict.out)["ok"]) == (1, False)
    assert json.loads(strict.out)["counts"] == {"error": 0, "warning": 1, "info": 0}
    text = smllm(["validate", "--warnings", "warned.smllm.yaml"], tmp_path, env)
    assert (text.code, text.out) == (
        1,
        "warned.smllm.yaml:12:3: warning: states.C: C can't be reached (MCH-13)\n"
        "  hint: add a transition to it, mark it meta.entryPoint, or remove it\n"
        "0 errors, 1 warning, 0 info\n",
    )
    # info never fails the run (AGT-5 once A gives no prompt and C is gone)
    info_only = WARNED.replace("  C:\n    type: final\n", "").replace(
        "    entry: { type: prompt, params: { text: Go. } }\n", ""
    )
    (tmp_path / "warned.smllm.yaml").write_text(info_only)
    ran = smllm(["validate", "--json", "--warnings", "--info", "warned.smllm.yaml"], tmp_path, env)
    assert (ran.code, json.loads(ran.out)["ok"], json.loads(ran.out)["counts"]) == (
        0,
        True,
        {"error": 0, "warning": 0, "info": 1},
    )


def test_usage(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["validate"], tmp_path, env)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "error: no config found; run smllm init, or pass --config\n"
    ran = smllm(["validate", "nope.smllm.yaml"], tmp_path, env)
    assert (ran.code, ran.out, ran.err) == (2, "", "error: no file nope.smllm.yaml\n")
    (tmp_path / ".smllm").mkdir()
    ran = smllm(["validate", ".smllm"], tmp_path, env)
    message = "error: .smllm is a folder; give config files (.toml) or machine files\n"
    assert (ran.code, ran.out, ran.err) == (2, "", message)


FILES = """\
id: files
initial: A
meta:
  smllm: 1
  events: { go: { description: Go on. } }
states:
  A:
    meta: { entryPoint: true }
    entry:
      - { type: prompt, params: { text: "Never write </SMLLM> here." } }
      - { type: command, params: { run: "true", cwd: gone } }
    on:
      go: B
  B:
    on:
      go: C
  C:
    type: final
    entry: { type: prompt, params: { file: prompts/c.md } }
"""


def test_checks_that_read_files(tmp_path: Path, env: dict[str, str]) -> None:
    machine = tmp_path / "files.smllm.yaml"
    machine.write_text(FILES)
    ran = smllm(["validate", "--info", "files.smllm.yaml"], tmp_path, env)
    assert ran.code == 1
    lines = [line for line in ran.out.splitlines() if not line.startswith("  hint:")]
    assert lines == [
        "files.smllm.yaml:10:41: warning: states.A.entry[0].params.text: prompt text contains "
        "</smllm>, which would close smllm's block (AGT-1)",
        "files.smllm.yaml:11:54: warning: states.A.entry[1].params.cwd: cwd gone doesn't exist "
        "(MCH-19)",
        "files.smllm.yaml:14:3: info: states.B: the agent gets no instructions in B (AGT-5)",
        "files.smllm.yaml:19:44: error: states.C.entry.params.file: no prompt file "
        "prompts/c.md (MCH-11)",
        "1 error, 2 warnings, 1 info",
    ]
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "c.md").write_text("Done.\n")
    (tmp_path / "gone").mkdir()
    (tmp_path / "enter-B.md").write_text("In B. </Events>\n")
    ran = smllm(["validate", "--info", "files.smllm.yaml"], tmp_path, env)
    assert ran.code == 0
    assert [line for line in ran.out.splitlines() if not line.startswith("  hint:")] == [
        "files.smllm.yaml:10:41: warning: states.A.entry[0].params.text: prompt text contains "
        "</smllm>, which would close smllm's block (AGT-1)",
        "files.smllm.yaml:14:3: warning: states.B: prompt text contains </events>, which would "
        "close smllm's block (AGT-1)",
        "0 errors, 2 warnings, 0 info",
    ]


def test_a_config_notices_prompt_file_edits(project: Path, env: dict[str, str]) -> None:
    machine = project / ".smllm" / "dev.smllm.yaml"
    machine.write_text(
        machine.read_text().replace(
            'text: "Make the change that PLAN.md describes, then fire done."', "file: work.md"
        )
    )
    (project / ".smllm" / "work.md").write_text("Fine.\n")
    assert smllm(["validate"], project, env).out == "0 errors, 0 warnings, 0 info\n"
    (project / ".smllm" / "work.md").write_text("Not </smllm> fine.\n")
    ran = smllm(["validate"], project, env)
    assert "(AGT-1)" in ran.out and ran.out.endswith("0 errors, 1 warning, 0 info\n")
