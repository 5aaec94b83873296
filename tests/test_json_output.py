"""What every command prints for a program to read (cli-and-harnesses.md §1, issue 8 defects 4,
7, 10): with `--json`, stdout holds exactly one JSON object that a strict parser reads (no
`Infinity`, no `NaN`), for success and for exit 1; non-finite numbers are refused wherever
params enter; listings keep one record per line; a closed stdout or one broken store doesn't
turn into an internal error."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Ran, enter_args, smllm, write_machine

NUMBERS = """\
id: numbers
description: A JSON number param.
initial: ASK
meta:
  smllm: 1
  instance:
    kind: note
    ref: { param: title, description: "Any title." }
  events:
    measured:
      description: Fire with the measure.
      params:
        type: object
        properties:
          x: { description: "The measure.", type: number }
        required: [x]
states:
  ASK:
    meta: { entryPoint: true }
    entry: { type: prompt, params: { text: "Measure, then fire measured." } }
    on: { measured: DONE }
  DONE:
    type: final
"""


def strict(text: str) -> Any:
    """One compact JSON object on one line, read by a parser that refuses NaN and Infinity."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    assert text.endswith("\n") and text.count("\n") == 1, text
    value = json.loads(text, parse_constant=refuse)
    assert isinstance(value, dict), text
    return value


def test_every_json_output_is_one_strict_object(project: Path, env: dict[str, str]) -> None:
    def run(*args: str, code: int) -> Any:
        ran = smllm([*args, "--json"], project, env)
        assert ran.code == code, (args, ran)
        value = strict(ran.out)
        if code == 1:
            assert value.get("ok") is False, (args, value)
        return value

    made = run("fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-1", code=0)
    key = made["session"]
    run("init", code=0)
    run("new", "review", code=0)
    run("new", "review", "--write", code=0)
    assert run("new", "review", "--write", code=1)["error"].endswith("review.smllm.yaml exists")
    run("session", "new", code=0)
    run("session", "list", code=0)
    run("session", "show", key, code=0)
    run("session", "show", key, "--audit", code=0)
    assert run("session", "show", "sm-nope00", code=1)["text"].startswith("error: no session")
    assert run("session", "show", "sm-nope00", "--audit", code=1)["error"] == (
        "no session sm-nope00"
    )
    run("fire", "--session", key, "yield", code=0)
    run("fire", "--session", key, "nope", code=1)
    run("fire", "--session", "sm-nope00", "yield", code=1)
    run("fire", "--session", key, "yield", "--params", "[1]", code=1)
    run("instance", "list", code=0)
    run("instance", "show", "GH-1", code=0)
    assert run("instance", "show", "nope", code=1) == {"ok": False, "error": "no instance nope"}
    run("graph", code=0)
    assert run("graph", "nope", code=1)["error"] == "no machine nope is configured"
    run("validate", code=0)
    (project / ".smllm" / "review.smllm.yaml").write_text("id: review\n")
    assert run("validate", code=1)["ok"] is False


@pytest.fixture
def numbers(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    folder = tmp_path / "numbers"
    write_machine(folder, "numbers", NUMBERS)
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=numbers", "--param", "title=t", "--json"],
        folder,
        env,
    )
    assert ran.code == 0, ran.err
    return folder, json.loads(ran.out)["session"]


def _history(folder: Path, env: dict[str, str]) -> str:
    ran = smllm(["instance", "show", "t", "--json"], folder, env)
    assert ran.code == 0
    return ran.out


def test_non_finite_numbers_are_refused_wherever_params_enter(
    numbers: tuple[Path, str], env: dict[str, str]
) -> None:
    folder, key = numbers
    before = _history(folder, env)
    fire = ["fire", "--session", key, "measured"]
    # --params: the text is refused before the call (a call error, nothing written)
    for text, reason in (
        ('{"x":1e400}', "1e400 is out of range for a JSON number"),
        ('{"x":-1e400}', "-1e400 is out of range for a JSON number"),
        ('{"x":NaN}', "NaN is not a JSON value"),
        ('{"x":Infinity}', "Infinity is not a JSON value"),
    ):
        ran = smllm([*fire, "--params", text], folder, env)
        assert (ran.code, ran.out) == (1, ""), ran
        assert ran.err == f"error: params must be a JSON object: {reason}\n"
        ran = smllm([*fire, "--params", text, "--json"], folder, env)
        assert ran.code == 1 and strict(ran.out)["ok"] is False
    # --param NAME=VALUE: a JSON param given as text is refused in the block (agent-text §9)
    for text, reason in (
        ("1e400", "1e400 is out of range for a JSON number"),
        ("Infinity", "Infinity is not a JSON value"),
        ("[1, NaN]", "NaN is not a JSON value"),
    ):
        ran = smllm([*fire, "--param", f"x={text}"], folder, env)
        assert ran.code == 1
        assert f"\nerror: measured param x must be a JSON value: {reason}\n" in ran.out
        ran = smllm([*fire, "--param", f"x={text}", "--json"], folder, env)
        assert ran.code == 1 and strict(ran.out)["ok"] is False
    assert _history(folder, env) == before
    # a finite number still goes through
    ran = smllm([*fire, "--params", '{"x":1e300}'], folder, env)
    assert ran.code == 0, ran.out
    assert '"params":{"x":1e+300}' in _history(folder, env)


def test_a_library_caller_cannot_hand_in_infinity(
    numbers: tuple[Path, str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from smllm.api.app import App

    folder, key = numbers
    monkeypatch.chdir(folder)
    for bad in (math.inf, -math.inf, math.nan):
        result = App().fire(key, "measured", (("x", bad),))
        assert not result.ok
        assert (
            result.reply.error
            == f"measured param x must be a JSON value: {bad} is not a JSON number"
        )
        strict(json.dumps(result.to_json()) + "\n")
    nested = App().fire(key, "measured", (("x", [1, {"y": math.inf}]),))
    assert nested.reply.error == "measured param x must be a JSON value: inf is not a JSON number"


def test_listings_keep_one_record_per_line(numbers: tuple[Path, str], env: dict[str, str]) -> None:
    folder, _key = numbers
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=numbers", "--param", "title=two\nlines\r"],
        folder,
        env,
    )
    assert ran.code == 0, ran.out
    listed = smllm(["instance", "list"], folder, env)
    assert listed.code == 0
    lines = listed.out.splitlines()
    assert len(lines) == 2
    assert [line.split()[1] for line in lines] == ["two\\nlines\\r", "t"]
    sessions = smllm(["session", "list"], folder, env)
    assert len(sessions.out.splitlines()) == 2
    assert "· note two\\nlines\\r  none  " in sessions.out
    shown = smllm(["instance", "show", "two\nlines\r"], folder, env)
    assert shown.code == 0
    assert shown.out.splitlines()[0].startswith("numbers note two\\nlines\\r (i-")


def test_a_closed_stdout_is_not_an_error(project: Path, env: dict[str, str]) -> None:
    """Started with stdout closed (`>&-`), a command still does its work and exits 0."""
    script = 'cd "$1" && "$2" -m smllm fire enter --param stateMachine=dev --param issueId=GH-3 >&-'
    ran = subprocess.run(
        ["bash", "-c", script, "-", str(project), sys.executable],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ran.returncode, ran.stderr) == (0, "")
    listed = smllm(["instance", "list"], project, env)
    assert " GH-3 " in listed.out
    for args in (["session", "list"], ["instance", "list"], ["session", "show", "sm-nope00"]):
        ran = subprocess.run(
            [
                "bash",
                "-c",
                'cd "$1" && shift && "$@" >&-',
                "-",
                str(project),
                sys.executable,
                "-m",
                "smllm",
                *args,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "internal error" not in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
        assert ran.returncode == (1 if args[-1] == "sm-nope00" else 0), ran.stderr


def test_a_broken_store_does_not_hide_the_other_sessions(
    tmp_path: Path, project: Path, env: dict[str, str]
) -> None:
    other = tmp_path / "other"
    write_machine(other, "numbers", NUMBERS)
    keys = []
    for folder, args in (
        (project, ["stateMachine=dev", "issueId=GH-1"]),
        (other, ["stateMachine=numbers", "title=t"]),
    ):
        params = [word for a in args for word in ("--param", a)]
        ran = smllm(["fire", "enter", *params, "--json"], folder, env)
        assert ran.code == 0, ran.err
        keys.append(json.loads(ran.out)["session"])
    broken = other / ".smllm" / "state" / "smllm.db"
    broken.write_bytes(b"this is not a database" * 100)
    for wal in broken.parent.glob("smllm.db-*"):
        wal.unlink()
    ran: Ran = smllm(["session", "list"], project, env)
    assert ran.code == 1
    lines = {line.split()[0]: line for line in ran.out.splitlines()}
    assert set(lines) == set(keys)
    assert lines[keys[0]].split("  ")[1] == "dev › PLAN · issue GH-1"
    assert lines[keys[1]].split("  ")[1] == "?"
    assert ran.err == f"error: {broken}: file is not a database\n"
    ran = smllm(["session", "list", "--json"], project, env)
    assert ran.code == 1
    value = strict(ran.out)
    assert value["errors"] == [f"{broken}: file is not a database"]
    assert [s["key"] for s in value["sessions"]] == keys[::-1]


def test_only_validate_prints_findings(project: Path, env: dict[str, str]) -> None:
    """validation.md §1: other commands say in one line that a file has errors."""
    smllm_dir = project / ".smllm"
    (smllm_dir / "bad.smllm.yaml").write_text("id: [x\n")
    config = smllm_dir / "config.toml"
    config.write_text(config.read_text().replace("files = [", 'files = ["bad.smllm.yaml", '))
    note = (
        "note: .smllm/bad.smllm.yaml has errors, so machines in it aren't configured; "
        "smllm validate tells why\n"
    )
    made = smllm(["session", "new", "--json"], project, env)
    assert (made.code, made.err) == (0, note)
    key = json.loads(made.out)["session"]
    for args in (
        ["session", "show", key],
        enter_args(key, "GH-1"),
        ["graph"],
        ["graph", "dev", "--mermaid"],
    ):
        ran = smllm(args, project, env)
        assert (ran.code, ran.err) == (0, note), (args, ran)
    ran = smllm(["graph", "bad"], project, env)
    assert (ran.code, ran.err) == (
        1,
        "error: no machine bad is configured (with errors: .smllm/bad.smllm.yaml; see smllm "
        "validate)\n",
    )
    ran = smllm(["validate"], project, env)
    assert ran.code == 1 and ran.out.startswith(".smllm/bad.smllm.yaml:2:1: error: not valid YAML")


def test_audit_json_keeps_the_record_kind(project: Path, env: dict[str, str]) -> None:
    """A `block` record's detail names the instance kind; in JSON that is `instanceKind`, and
    `kind` stays the record's own (it once read `issue` for a block)."""
    start = smllm(
        ["harness", "hook", "claude", "session-start"],
        project,
        env,
        stdin=json.dumps({"session_id": "c-1", "cwd": str(project)}),
    )
    assert start.code == 0, start
    key = json.loads(start.out)["hookSpecificOutput"]["additionalContext"].split()[2]
    assert key.startswith("sm-"), start.out
    entered = smllm(enter_args(key, "GH-7"), project, env)
    assert entered.code == 0, entered
    stop = smllm(
        ["harness", "hook", "claude", "stop"],
        project,
        env,
        stdin=json.dumps({"session_id": "c-1", "cwd": str(project), "stop_hook_active": False}),
    )
    assert json.loads(stop.out)["decision"] == "block", stop
    audit = strict(smllm(["session", "show", key, "--audit", "--json"], project, env).out)
    block = [a for a in audit["audit"] if a["kind"] == "block"]
    assert len(block) == 1, audit
    assert block[0]["instanceKind"] == "issue" and block[0]["state"] == "PLAN", block


def test_params_text_keeps_a_repeated_name(project: Path, env: dict[str, str]) -> None:
    """`--params` read keeping a name given twice (the top-level object's): the engine refuses
    it, where a plain JSON read would keep the last value and go on. A key repeated inside a
    param's value is refused before the engine sees the call (issue 20 §8)."""
    head = '{"stateMachine": "dev", "issueId": "GH-3", "x": {"a": 1}'
    ran = smllm(["fire", "enter", "--params", head + ', "stateMachine": "dev"}'], project, env)
    assert ran.code == 1
    assert "error: enter got param stateMachine more than once" in ran.out
    nested = smllm(["fire", "enter", "--params", head[:-1] + ', "a": 2}}'], project, env)
    assert (nested.code, nested.out) == (1, "")
    assert nested.err == (
        'error: params must be a JSON object: param x repeats the key "a" in its value\n'
    )
