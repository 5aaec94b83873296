"""Fuzz the config side of `smllm validate`: whatever config.toml holds, the checks answer.

The property, for any bytes in `.smllm/config.toml` (the machine files it may name are real):

- reading and combining the config (`load_configs`), the validate-only idle checks and the
  saved-instance checks (`check_saved`) never raise and never hang;
- a config that `tomllib` rejects gives exactly one finding, CFG-1, with a line inside the file;
- every finding about the config carries a line inside the file: each names a key or a value
  that is in the source (INS findings about the default store, which no key names, aside);
- every finding is one line (message, path, hint), and its rule and level fit validation.md.

Two sources of input: valid configs mutated as TOML data (dumped with tomlkit), and the same
configs mutated as text. SMLLM_FUZZ_EXAMPLES (default 300) sets the number of cases for both.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from helpers.fuzz_property import check_wording, fuzz_settings, line_count, time_limit
from hypothesis import given
from hypothesis import strategies as st

from smllm.api.saved_checks import check_saved
from smllm.machine.configs.config import load_configs
from smllm.machine.findings import Finding

HERE = Path(__file__).resolve().parent
FIX = HERE / "machines" / "fix"  # fix.smllm.yaml and its prompt files
_RULE = re.compile(r"^(CFG|FMT|MCH|EVT|AGT|INS)-[0-9]+$")

SEED_CONFIGS = (
    '[machines]\nfiles = ["fix.smllm.yaml"]\n',
    '# a comment\n[machines]\nfiles = [\n  "fix.smllm.yaml",\n  "other.smllm.yaml",\n]\n'
    '[idle]\non-enter = { text = "Pick a machine." }\n[state]\ndir = "state"\n',
    'machines.files = ["fix.smllm.yaml"]\nidle.on-enter.file = "idle.md"\n'
    '[harness.claude]\nwithout = ["statusline"]\n[harness.codex]\nwithout = []\n',
    '[machines]\nfiles = ["fix.smllm.yaml"]\n[state]\nurl = "postgresql://localhost/smllm"\n'
    'namespace = "team"\n',
    "[machines]\nfiles = ['fix.smllm.yaml']\n[idle.on-enter]\nfile = 'idle.md'\n"
    '[state]\nurl-env = "SMLLM_FUZZ_UNSET"\n',
)

KEYS = (
    "machines", "files", "idle", "on-enter", "text", "file", "state", "dir", "url", "url-env",
    "namespace", "harness", "claude", "codex", "copilot", "opencode", "agents", "without",
    "instructions", "mcp", "hooks", "plugin", "statusline", "permissions", "", " ", "a.b",
    "é", "a\nb", '"', "'", "[x]", "0", "true", "machine", "File", "ON-ENTER",
)  # fmt: skip
VALUES: tuple[Any, ...] = (
    "fix.smllm.yaml", "other.smllm.yaml", "nope.smllm.yaml", "../x", "/dev/zero", "idle.md",
    "", "a\nb", "\x00", "postgresql://h/db", "mysql://h", "HOME", "PATH", "SMLLM_FUZZ_UNSET",
    "statusline", "mcp", 0, -1, 1.5, True, [], ["fix.smllm.yaml", "fix.smllm.yaml"], [1, "x"],
    {}, {"text": "t"}, {"file": "idle.md"}, {"text": "a", "file": "b"}, {"x": 1}, [[]], [{}],
)  # fmt: skip


def _value(draw: st.DrawFn) -> Any:
    return copy.deepcopy(draw(st.sampled_from(VALUES)))  # mutations must not reach VALUES


@st.composite
def mutated_data(draw: st.DrawFn) -> str:
    data: Any = tomllib.loads(draw(st.sampled_from(SEED_CONFIGS)))
    for _ in range(draw(st.integers(1, 4))):
        tables = [data, *[v for v in data.values() if isinstance(v, dict)]]
        tables += [v for t in tables[1:] for v in t.values() if isinstance(v, dict)]
        table = draw(st.sampled_from(tables))
        op = draw(st.sampled_from(("set", "delete", "rename", "nest")))
        if op == "set" or not table:
            table[draw(st.sampled_from(KEYS))] = _value(draw)
        elif op == "delete":
            del table[draw(st.sampled_from(sorted(table)))]
        elif op == "rename":
            old = draw(st.sampled_from(sorted(table)))
            table[draw(st.sampled_from(KEYS))] = table.pop(old)
        else:
            table[draw(st.sampled_from(KEYS))] = {draw(st.sampled_from(KEYS)): _value(draw)}
    return tomlkit.dumps(data)


@st.composite
def mutated_text(draw: st.DrawFn) -> bytes:
    lines = draw(st.sampled_from(SEED_CONFIGS)).encode().splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(("delete", "duplicate", "insert", "flip", "cut")))
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        if op == "delete" and lines:
            del lines[at]
        elif op == "duplicate" and lines:
            lines.insert(at, lines[at])
        elif op == "insert":
            snippet = draw(
                st.sampled_from(
                    (
                        b"[machines]\n", b"files = 3\n", b'"a\\nb" = 1\n', b"x.y.z = 1\n",
                        b"[[machines]]\n", b"[harness.nope]\n", b"without = [1]\n",
                        b'on-enter = { text = "</smllm>" }\n', b"files = [\n", b"\xff\n",
                        b'"\xc3\xa9" = 1\n', b"'lit.eral' = 2\n", b"[ state ]\n", b"\t\n",
                        b'dir = """\nmulti\n"""\n', b"a = {b = {c = 1}}\n",
                    )
                )
            )  # fmt: skip
            lines.insert(at, snippet)
        elif op == "flip" and lines:
            line = bytearray(lines[at])
            if line:
                i = draw(st.integers(0, len(line) - 1))
                line[i] = draw(st.integers(0, 255))
            lines[at] = bytes(line)
        elif op == "cut" and lines:
            lines = lines[:at]
    return b"".join(lines)


def check_config(project: Path, source: bytes | str) -> None:
    folder = project / ".smllm"
    config = folder / "config.toml"
    config.write_bytes(source.encode() if isinstance(source, str) else source)
    lines = line_count(source)
    with time_limit(5, "validating the config"):
        loaded = load_configs((str(config),), cwd="")
        from smllm.cli.validate import _now_findings

        findings: list[Finding] = [*loaded.findings, *_now_findings(loaded.configs)]
        findings += check_saved(loaded)
    try:
        text = config.read_bytes().decode("utf-8")
        tomllib.loads(text)
        valid = True
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        valid = False
    mine = [f for f in findings if f.file == str(config)]
    if not valid:
        assert [f.rule for f in mine] == ["CFG-1"], [f.text() for f in mine]
    for f in findings:
        check_wording(f, _RULE)
    for f in mine:
        if f.rule.startswith("INS") and f.line is None:
            continue  # about the store, not the text: the default store has no key
        assert f.line is not None, f"a config finding without a line: {f.text()}"
        assert 1 <= f.line <= lines, f"line out of the file: {f.text()}"
        assert f.col is None or f.col >= 1, f.text()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("config-fuzz")
    folder = root / ".smllm"
    shutil.copytree(FIX, folder)
    fix = (folder / "fix.smllm.yaml").read_text()
    (folder / "other.smllm.yaml").write_text(fix.replace("id: fix", "id: other", 1))
    (folder / "idle.md").write_text("Pick a machine, then fire enter.\n")
    os.environ.pop("SMLLM_FUZZ_UNSET", None)
    return root


@pytest.mark.parametrize("seed", SEED_CONFIGS)
def test_seed_configs_are_clean(project: Path, seed: str) -> None:
    check_config(project, seed)
    loaded = load_configs((str(project / ".smllm" / "config.toml"),), cwd="")
    errors = [f.text() for f in loaded.findings if f.level == "error"]
    # the last seed names a variable that is unset (CFG-10)
    assert errors == [] or "SMLLM_FUZZ_UNSET" in seed, errors


@fuzz_settings(0.5)
@given(mutated_data())
def test_fuzz_config_data(project: Path, source: str) -> None:
    check_config(project, source)


@fuzz_settings(0.5)
@given(mutated_text())
def test_fuzz_config_text(project: Path, source: bytes) -> None:
    check_config(project, source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # a table defined only by a longer header had no position
        (
            b'[machines]\nfiles = ["fix.smllm.yaml"]\n[files.machines]\nx = 1\n',
            "CFG-2 3:2 unknown key files (allowed: machines, idle, state, harness)",
        ),
        # a config that isn't UTF-8 had no position
        (
            b'\x80machines]\nfiles = ["fix.smllm.yaml"]\n',
            "CFG-1 1:1 not valid TOML: not UTF-8 (byte 0)",
        ),
        (b"# \xc3\xa9\n# \xff\n", "CFG-1 2:3 not valid TOML: not UTF-8 (byte 7)"),
        # a harness that isn't a table was reported at a `without` that isn't there
        (b'[harness]\nclaude = "x"\n', "CFG-2 2:10 harness.claude must be a table"),
    ],
)
def test_found_by_the_fuzzer(project: Path, source: bytes, expected: str) -> None:
    check_config(project, source)
    config = project / ".smllm" / "config.toml"
    loaded = load_configs((str(config),), cwd="")
    f = next(f for f in loaded.findings if f.level == "error")
    assert f"{f.rule} {f.line}:{f.col} {f.message}" == expected
