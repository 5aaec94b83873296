"""Bad input gets a clear message and exit 1 or 2, never a traceback (real `smllm` processes)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Ran, enter_args, smllm

#: what commands other than validate say of a broken machine file or config (validation.md §1)
NOTE = "note: {} errors, so machines in it aren't configured; smllm validate tells why\n"


def _ok(ran: Ran) -> None:
    assert "Traceback" not in ran.err and "Traceback" not in ran.out


def _session(project: Path, env: dict[str, str]) -> str:
    ran = smllm(["session", "new", "--json"], project, env)
    assert ran.code == 0, ran.err
    key: str = json.loads(ran.out)["session"]
    return key


def test_broken_yaml_is_left_out_with_its_line(project: Path, env: dict[str, str]) -> None:
    (project / ".smllm" / "dev.smllm.yaml").write_text("id: dev\ninitial: [PLAN\nmeta: {}\n")
    ran = smllm(["session", "new"], project, env)
    _ok(ran)
    assert ran.code == 0
    assert "No state machines are configured." in ran.out
    # findings are validate's to print (validation.md §1); other commands say so in a line
    assert ran.err == NOTE.format(".smllm/dev.smllm.yaml has")
    ran = smllm(["validate"], project, env)
    assert ran.code == 1
    assert ran.out.startswith(".smllm/dev.smllm.yaml:3:")
    assert "error: not valid YAML: " in ran.out and "(FMT-1)" in ran.out


def test_unknown_keys_and_duplicates(project: Path, env: dict[str, str]) -> None:
    path = project / ".smllm" / "dev.smllm.yaml"
    text = path.read_text().replace("initial: PLAN", "initial: PLAN\ninitail: PLAN\nid: dup")
    path.write_text(text)
    ran = smllm(["session", "new"], project, env)
    _ok(ran)
    assert ran.err == NOTE.format(".smllm/dev.smllm.yaml has")
    ran = smllm(["validate"], project, env)
    assert ran.out.splitlines()[::2] == [
        ".smllm/dev.smllm.yaml:4:1: error: initail: unknown key initail (allowed: id, "
        "description, initial, meta, states) (FMT-4)",
        ".smllm/dev.smllm.yaml:5:1: error: id: id is repeated (first at line 1) (FMT-2)",
        "2 errors, 0 warnings, 0 info",
    ]


def test_broken_toml(project: Path, env: dict[str, str]) -> None:
    (project / ".smllm" / "config.toml").write_text('[machines]\nfiles = ["dev.smllm.yaml"\n')
    ran = smllm(["session", "new"], project, env)
    _ok(ran)
    assert ran.code == 0
    assert ran.err == NOTE.format(".smllm/config.toml has")
    ran = smllm(["validate"], project, env)
    assert ran.out.startswith(".smllm/config.toml:3:1: error: not valid TOML: ")
    assert "(CFG-1)\n" in ran.out
    (project / ".smllm" / "config.toml").write_text(
        '[machines]\nfiles = ["dev.smllm.yaml"]\nfile = 3\n[extra]\n'
    )
    ran = smllm(["validate"], project, env)
    assert "unknown key machines.file (allowed: files) (CFG-2)" in ran.out
    assert "unknown key extra (allowed: machines, idle, state, harness) (CFG-2)" in ran.out


def test_params_that_are_not_an_object(project: Path, env: dict[str, str]) -> None:
    for text, message in (
        ("[1]", "error: params must be an object"),
        ("{", "error: params must be a JSON object: Expecting property name"),
    ):
        ran = smllm(["fire", "enter", "--params", text], project, env)
        _ok(ran)
        assert ran.code == 1 and ran.out == ""
        assert ran.err.startswith(message)
    ran = smllm(["fire", "enter", "--params", "[1]", "--json"], project, env)
    assert ran.code == 1
    assert json.loads(ran.out)["ok"] is False


def test_megabyte_params_are_refused(project: Path, env: dict[str, str]) -> None:
    key = _session(project, env)
    params = json.dumps({"stateMachine": "dev", "issueId": "x" * 1_000_000})
    ran = smllm(["fire", "--session", key, "enter", "--params", "-"], project, env, params)
    _ok(ran)
    assert ran.code == 1
    assert "error: enter params are too large (1000042 bytes of JSON; at most 65536)" in ran.out
    assert not (project / ".smllm" / "state").exists()  # nothing was written


def test_ref_with_a_newline(project: Path, env: dict[str, str]) -> None:
    key = _session(project, env)
    ran = smllm(enter_args(key, "GH-1\n"), project, env)
    _ok(ran)
    assert ran.code == 1
    assert 'error: enter param issueId must match ^GH-[0-9]+$ (got "GH-1\\n")' in ran.out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["fire", "enter", "--param", "stateMachine"], 2, "error: --param needs NAME=VALUE"),
        (["--config", "nope.toml", "session", "new"], 2, "error: config file nope.toml not found"),
        (["fire", "--session", "sm-zzzzzz", "yield"], 1, "error: no session sm-zzzzzz; "),
        (["fire", "yield"], 1, "error: yield needs a session; "),
        (["session", "show", "sm-zzzzzz"], 1, "error: no session sm-zzzzzz"),
        (["frob"], 2, "error: argument COMMAND: invalid choice: 'frob'"),
        (["new", "bad id"], 2, "error: machine name bad id must match"),
    ],
)
def test_usage_and_call_errors(
    project: Path, env: dict[str, str], args: list[str], code: int, message: str
) -> None:
    ran = smllm(args, project, env)
    _ok(ran)
    assert ran.code == code
    assert ran.err.startswith(message), ran.err
    if code == 2:
        assert ran.out == ""


def test_no_config_where_one_is_needed(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["instance", "list"], tmp_path, env)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "error: no config found; run smllm init, or pass --config\n"
    ran = smllm(["new", "x", "--write"], tmp_path, env)
    assert (ran.code, ran.err) == (2, "error: no config found; run smllm init, or pass --config\n")


def test_a_broken_or_newer_store(project: Path, env: dict[str, str]) -> None:
    key = _session(project, env)
    user_db = Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    conn = sqlite3.connect(user_db)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    ran = smllm(["session", "show", key], project, env)
    _ok(ran)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"error: {user_db} was written by a newer smllm\n"
    for f in user_db.parent.iterdir():
        f.unlink()
    user_db.write_bytes(b"this is not a database" * 100)
    ran = smllm(["session", "show", key], project, env)
    _ok(ran)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err.startswith(f"error: {user_db}: file is not a database")


def test_deeply_nested_params_are_refused(project: Path, env: dict[str, str]) -> None:
    key = _session(project, env)
    # deeper than Python's json can read: a usage-level error, not "internal error"
    text = '{"x": ' + "[" * 5000 + "]" * 5000 + "}"
    ran = smllm(["fire", "--session", key, "enter", "--params", "-"], project, env, text)
    _ok(ran)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == "error: params must be a JSON object: it nests too deeply\n"
    # readable, but deeper than a param may nest (jsonschema recurses per level)
    deep: object = []
    for _ in range(65):
        deep = [deep]
    params = json.dumps({"stateMachine": "dev", "issueId": "GH-1", "x": deep})
    ran = smllm(["fire", "--session", key, "enter", "--params", "-"], project, env, params)
    _ok(ran)
    assert ran.code == 1
    assert "error: enter params nest more than 64 levels deep" in ran.out
    assert not (project / ".smllm" / "state").exists()  # nothing was written


def test_a_json_param_given_as_text_nested_too_deeply() -> None:
    from smllm.engine.rules import check_params
    from smllm.machine.loader.params import read_params

    specs, defs, problems = read_params({"properties": {"files": {"type": "array"}}})
    assert problems == []
    for depth in (65, 5000):  # within and past what Python's json reads
        text = "[" * depth + "]" * depth
        refusal, _ = check_params("go", specs, defs, (("files", text),))
        assert refusal == "go param files must be a JSON value: it nests more than 64 levels deep"
    refusal, checked = check_params("go", specs, defs, (("files", "[" * 64 + "]" * 64),))
    assert refusal is None and checked["files"] == json.loads("[" * 64 + "]" * 64)


def test_prompt_files_that_are_no_regular_file_or_too_large(
    project: Path, env: dict[str, str]
) -> None:
    # a FIFO would block the hook that reads it, /dev/zero never ends: both are refused
    config = project / ".smllm" / "config.toml"
    for name, make, problem in (
        ("fifo.md", os.mkfifo, "not a regular file"),
        ("big.md", lambda p: Path(p).write_bytes(b"x" * (1 << 20 | 1)), "larger than 1 MiB"),
        ("zero.md", lambda p: os.symlink("/dev/zero", p), "not a regular file"),
    ):
        make(str(project / ".smllm" / name))
        config.write_text(
            config.read_text().split("[idle]")[0] + f'[idle]\non-enter = {{ file = "{name}" }}\n'
        )
        ran = smllm(["session", "new"], project, env)
        _ok(ran)
        assert ran.code == 0, ran.err
        assert f"Prompt failed: {name}: {problem}" in ran.out


def test_bytes_that_are_not_utf8(project: Path, env: dict[str, str]) -> None:
    # bytes that aren't UTF-8 reach Python as lone surrogates, which no store can hold
    key = _session(project, env)
    ran = smllm(["fire", "--session", key, "enter", "--param", "issueId=GH-\udcff"], project, env)
    _ok(ran)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "error: argument 'issueId=GH-\\udcff' is not UTF-8 text\n"
    ran = smllm(["session", "show", "sm-\udcff"], project, env)
    assert (ran.code, ran.err) == (2, "error: argument 'sm-\\udcff' is not UTF-8 text\n")
    for io in ("utf-8:strict", "utf-8:surrogateescape"):  # as locales decide it
        proc = subprocess.run(
            [sys.executable, "-m", "smllm", "fire", "--session", key, "enter", "--params", "-"],
            cwd=project,
            env={**env, "PYTHONIOENCODING": io},
            input=b'{"stateMachine": "dev", "issueId": "GH-\xff"}',
            capture_output=True,
        )
        assert (proc.returncode, proc.stdout) == (1, b"")
        message = b"error: params must be a JSON object: standard input is not UTF-8 text\n"
        assert proc.stderr == message
    assert not (project / ".smllm" / "state").exists()  # nothing was written


def test_a_state_home_that_is_a_file(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "state-file"
    state.write_text("not a folder\n")
    ran = smllm(["session", "new"], project, {**env, "XDG_STATE_HOME": str(state)})
    _ok(ran)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == f"error: can't create {state / 'smllm'}: Not a directory\n"


def test_a_file_where_a_folder_goes(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / ".smllm").write_text("a file, not the folder\n")
    ran = smllm(["init"], tmp_path, env)
    _ok(ran)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == f"error: can't create {tmp_path / '.smllm'}: File exists\n"
    assert (tmp_path / ".smllm").read_text() == "a file, not the folder\n"
