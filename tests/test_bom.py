"""A UTF-8 byte order mark at the start of a config or a machine file (issue 8, item 10 of
defect 10). Both are accepted: YAML 1.2 allows one (§5.2), and a TOML file is a UTF-8 document,
which may start with one (toml-lang/toml#437; tomllib itself refuses it). The mark is no
character of the document: every finding's line:col is that of the same file without it.

Real `smllm validate` processes; the expected columns are counted in the text after the mark.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import smllm

BOM = b"\xef\xbb\xbf"
MACHINE = b"id: a\ninitial: s\nmeta: {smllm: 1}\nstates: {s: {type: final}}\n"


def _validate(project: Path, env: dict[str, str], config: bytes) -> tuple[int, str]:
    (project / ".smllm" / "config.toml").write_bytes(BOM + config)
    ran = smllm(["validate"], project, env)
    assert ran.err == ""
    return ran.code, ran.out


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    (project / ".smllm").mkdir(parents=True)
    (project / ".smllm" / "a.smllm.yaml").write_bytes(MACHINE)
    return project


def test_a_config_with_a_bom_loads(folder: Path, env: dict[str, str]) -> None:
    machine = (
        "id: a\ninitial: s\nmeta: {smllm: 1, events: {done: {description: Done.}}}\n"
        "states:\n  s:\n    meta: {entryPoint: true}\n"
        "    entry: {type: prompt, params: {text: Go.}}\n    on: {done: t}\n  t: {type: final}\n"
    )
    (folder / ".smllm" / "a.smllm.yaml").write_bytes(BOM + machine.encode())
    assert _validate(folder, env, b'[machines]\nfiles = ["a.smllm.yaml"]\n') == (
        0,
        "0 errors, 0 warnings, 0 info\n",
    )
    ran = smllm(["session", "new"], folder, env)
    assert (ran.code, ran.err) == (0, "")
    assert "- a\n    instance id param ref\n    starts at: s; entry points: s\n" in ran.out


def test_config_findings_on_the_first_line(folder: Path, env: dict[str, str]) -> None:
    hint2 = (
        "  hint: allowed: [machines] files, [idle] on-enter, [state] dir, url, url-env, "
        "namespace, [harness.NAME] without\n"
    )
    # CFG-2 at a key on the mark's line and at a value further down
    assert _validate(folder, env, b'bogus = 1\n[machines]\nfiles = ["a.smllm.yaml", 7]\n') == (
        1,
        ".smllm/config.toml:1:1: error: bogus: unknown key bogus (allowed: machines, idle, "
        f"state, harness) (CFG-2)\n{hint2}.smllm/config.toml:3:9: error: machines.files: "
        f"machines.files must be a list of paths (CFG-2)\n{hint2}2 errors, 0 warnings, 0 info\n",
    )
    # CFG-3 inside an array on the first line
    assert _validate(folder, env, b'machines.files = ["a.smllm.yaml", "b.yaml"]\n') == (
        1,
        ".smllm/config.toml:1:35: error: machines.files[1]: no machine file b.yaml (CFG-3)\n"
        "  hint: paths are relative to the config file's folder\n"
        "1 error, 0 warnings, 0 info\n",
    )
    # CFG-9 of validate's idle check, which reads the config's text itself
    assert _validate(folder, env, b'idle.on-enter = { file = "nope.md" }\n') == (
        1,
        ".smllm/config.toml:1:26: error: idle.on-enter.file: no prompt file nope.md (CFG-9)\n"
        '  hint: give text = "…" or file = "PATH"\n'
        "1 error, 0 warnings, 0 info\n",
    )


@pytest.mark.parametrize(
    ("config", "finding"),
    [
        # the byte is counted in the file (the mark's 3 bytes included), the column in text
        (b"ab\xff = 1\n", "1:3: error: not valid TOML: not UTF-8 (byte 5)"),
        (b"a = \n", "1:5: error: not valid TOML: Invalid value"),
        (b"a = 1 x\n", "1:7: error: not valid TOML: Expected newline or end of document after a"),
    ],
)
def test_toml_errors_on_the_first_line(
    folder: Path, env: dict[str, str], config: bytes, finding: str
) -> None:
    code, out = _validate(folder, env, config)
    assert code == 1
    assert out.startswith(f".smllm/config.toml:{finding}")
    assert out.endswith(
        " (CFG-1)\n  hint: fix the TOML syntax at this line\n1 error, 0 warnings, 0 info\n"
    )


@pytest.mark.parametrize(
    ("machine", "finding"),
    [
        (b"id: a\xff\n", "1:6: error: not valid YAML: not UTF-8: invalid start byte (FMT-1)"),
        (
            MACHINE.replace(b"id: a", b"id: a b c"),
            "1:5: error: id: machine name a b c must match ^[A-Za-z0-9_-]+$ (FMT-7)",
        ),
    ],
)
def test_machine_findings_on_the_first_line(
    folder: Path, env: dict[str, str], machine: bytes, finding: str
) -> None:
    (folder / ".smllm" / "a.smllm.yaml").write_bytes(BOM + machine)
    code, out = _validate(folder, env, b'[machines]\nfiles = ["a.smllm.yaml"]\n')
    assert code == 1
    assert out.startswith(f".smllm/a.smllm.yaml:{finding}\n")


def test_a_broken_project_machine_with_a_bom_withdraws_the_users(
    folder: Path, env: dict[str, str]
) -> None:
    # CFG-8 reads the `id:` line of a file that isn't YAML; the mark starts no line
    user = Path(env["XDG_CONFIG_HOME"]) / "smllm"
    user.mkdir(parents=True)
    (user / "a.smllm.yaml").write_bytes(MACHINE)
    (user / "config.toml").write_text('[machines]\nfiles = ["a.smllm.yaml"]\n')
    (folder / ".smllm" / "a.smllm.yaml").write_bytes(BOM + b"id: a\ninitial: [\n")
    code, out = _validate(folder, env, b'[machines]\nfiles = ["a.smllm.yaml"]\n')
    assert code == 1
    assert out.startswith(
        ".smllm/a.smllm.yaml: warning: the user's machine a is not loaded either, because "
        ".smllm/a.smllm.yaml has errors (CFG-8)\n"
    )


def test_a_prompt_file_bom_is_not_shown_to_the_agent(project: Path, env: dict[str, str]) -> None:
    """Prompt files are read without a leading BOM: the agent's instructions and `compile`'s
    inlined text never hold U+FEFF."""
    smllm_dir = project / ".smllm"
    (smllm_dir / "plan.md").write_bytes(BOM + b"Read ISSUE.md, then plan.\r\n")
    machine = smllm_dir / "dev.smllm.yaml"
    machine.write_text(
        machine.read_text().replace(
            'params: { text: "Write a plan for the issue in PLAN.md, then fire planned." }',
            "params: { file: plan.md }",
        )
    )
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-1"], project, env
    )
    assert ran.code == 0, ran.err
    assert "\ufeff" not in ran.out
    assert "\n<instructions>\nRead ISSUE.md, then plan.\n</instructions>\n" in ran.out
    compiled = smllm(["compile", ".smllm/dev.smllm.yaml"], project, env)
    assert compiled.code == 0 and "Read ISSUE.md, then plan." in compiled.out
    assert "\\ufeff" not in compiled.out and "\ufeff" not in compiled.out


def test_codex_trust_is_read_from_a_config_with_a_bom(project: Path, env: dict[str, str]) -> None:
    """Codex's config.toml starting with a BOM still says the project is trusted: install
    doesn't tell the user to trust it again."""
    import json

    codex = Path(env["HOME"]) / ".codex" / "config.toml"
    codex.parent.mkdir(parents=True)
    table = f'[projects.{json.dumps(str(project))}]\ntrust_level = "trusted"\n'
    codex.write_bytes(BOM + table.encode())
    ran = smllm(["harness", "install", "codex"], project, env)
    assert ran.code == 0, ran
    assert "note: Codex runs hooks only once you trust them" in ran.err
    assert "note: Codex reads .codex/ only in a trusted project" not in ran.err
