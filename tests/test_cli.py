"""The CLI's commands as a user runs them: real `smllm` processes, exact outputs and files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import smllm
from hypothesis import given, settings
from hypothesis import strategies as st


def test_version(tmp_path: Path, env: dict[str, str]) -> None:
    from smllm import __version__

    ran = smllm(["--version"], tmp_path, env)
    assert (ran.code, ran.out) == (0, f"smllm {__version__}\n")


def test_init_and_new_write(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["init"], tmp_path, env)
    assert (ran.code, ran.out) == (0, "created .smllm/config.toml\n")
    config = tmp_path / ".smllm" / "config.toml"
    config.write_text(
        config.read_text().replace("files = []", "files = []  # keep me")
        + "\n# a comment at the end\n"
    )
    ran = smllm(["init", "--json"], tmp_path, env)
    assert json.loads(ran.out) == {"path": str(config), "created": False}
    ran = smllm(["new", "review", "--write"], tmp_path, env)
    assert ran.code == 0, ran.err
    assert ran.out == (
        "wrote .smllm/review.smllm.yaml; added it to .smllm/config.toml\n"
        "wrote .smllm/smllm.schema.json, the machine schema that editors read\n"
    )
    review = (tmp_path / ".smllm" / "review.smllm.yaml").read_text()
    assert review.startswith("# yaml-language-server: $schema=smllm.schema.json\n")
    schema = json.loads((tmp_path / ".smllm" / "smllm.schema.json").read_text())
    assert schema == json.loads(smllm(["info", "schema"], tmp_path, env).out)
    text = config.read_text()
    assert 'files = ["review.smllm.yaml"]  # keep me' in text
    assert text.endswith("# a comment at the end\n")
    ran = smllm(["new", "review", "--write"], tmp_path, env)
    assert (ran.code, ran.err) == (1, "error: .smllm/review.smllm.yaml exists\n")
    (tmp_path / "machines").mkdir()
    ran = smllm(["new", "ship", "--write", "--dir", "machines", "--json"], tmp_path, env)
    out = json.loads(ran.out)
    assert out["written"] is True and out["path"] == str(tmp_path / "machines" / "ship.smllm.yaml")
    assert out["schema"] is None  # already there: left as it was
    ship = (tmp_path / "machines" / "ship.smllm.yaml").read_text()
    assert ship.startswith("# yaml-language-server: $schema=../.smllm/smllm.schema.json\n")
    assert '"review.smllm.yaml", "../machines/ship.smllm.yaml"' in config.read_text()
    # an id already configured (in any case) is refused, whatever the folder: nothing written
    before = config.read_text()
    for taken in ("ship", "Ship"):
        ran = smllm(["new", taken, "--write", "--dir", "elsewhere"], tmp_path, env)
        assert (ran.code, ran.out) == (1, ""), ran
        assert ran.err == (
            "error: a machine with id ship is already configured (machines/ship.smllm.yaml)\n"
        )
    assert config.read_text() == before and not (tmp_path / "elsewhere").exists()
    # the templates are valid machines: the session's idle list names both
    ran = smllm(["session", "new"], tmp_path, env)
    assert ran.err == ""
    assert "- review: What this machine guides, in one line." in ran.out
    assert "- ship: What this machine guides, in one line." in ran.out


def test_init_user(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["init", "--user"], tmp_path, env)
    assert ran.code == 0
    assert (Path(env["XDG_CONFIG_HOME"]) / "smllm" / "config.toml").exists()


def test_new_prints_a_template(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["new", "triage"], tmp_path, env)
    assert ran.code == 0
    assert ran.out.startswith("# yaml-language-server: $schema=smllm.schema.json\nid: triage\n")
    assert not (tmp_path / ".smllm").exists()


def _key(ran_out: str) -> str:
    match = re.search(r"session (sm-[0-9a-z]{6})", ran_out)
    assert match
    return match.group(1)


def test_sessions_and_instances(project: Path, env: dict[str, str]) -> None:
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-4", "--json"],
        project,
        env,
    )
    reply = json.loads(ran.out)
    key = reply["session"]
    assert reply["ok"] is True and reply["location"]["state"] == "PLAN"
    assert reply["location"]["ref"] == "GH-4" and reply["location"]["machine"] == "dev"
    assert reply["text"].startswith(f"<smllm>\nsession {key} · dev › PLAN · issue GH-4\n")
    ran = smllm(["fire", "--session", key, "planned", "--param", "size=small"], project, env)
    assert ran.code == 0
    ran = smllm(["fire", "--session", key, "done", "--json"], project, env)
    assert ran.code == 1 and json.loads(ran.out)["ok"] is False
    idle = smllm(["session", "new", "--json"], project, env)
    idle_key = json.loads(idle.out)["session"]

    ran = smllm(["session", "list"], project, env)
    lines = ran.out.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(
        rf"{idle_key}  idle {{21}}none  \d{{4}}-\d\d-\d\d \d\d:\d\d UTC  "
        + re.escape(str(project)),
        lines[0],
    ), lines[0]
    assert lines[1].startswith(f"{key}  dev › PLAN · issue GH-4  none  ")
    listed = json.loads(smllm(["session", "list", "--json"], project, env).out)["sessions"]
    assert listed[1]["holding"]["label"] == "GH-4" and listed[0]["holding"] is None

    shown = json.loads(smllm(["session", "show", key, "--json"], project, env).out)
    assert shown["session"]["key"] == key and shown["text"].startswith("<smllm>")
    audit = smllm(["session", "show", key, "--audit"], project, env).out.splitlines()
    assert [line.split("  ")[1] for line in audit] == ["bind", "event", "event"]
    assert audit[2].endswith("  event  planned dev GH-4 PLAN → PLAN")
    audit_json = json.loads(smllm(["session", "show", key, "--audit", "--json"], project, env).out)
    assert audit_json["audit"][1]["event"] == "enter"

    ran = smllm(["instance", "list"], project, env)
    assert re.fullmatch(
        rf"dev  GH-4  PLAN  active  {key}  \d{{4}}-\d\d-\d\d \d\d:\d\d UTC\n", ran.out
    )
    assert smllm(["instance", "list", "--status", "paused"], project, env).out == ""
    data = json.loads(smllm(["instance", "list", "--json"], project, env).out)["instances"]
    assert data[0]["visits"] == {"PLAN": 2} and data[0]["version"] == 2
    show = smllm(["instance", "show", "GH-4"], project, env).out.splitlines()
    assert show[0].startswith("dev issue GH-4 (i-")
    assert show[1] == f"state: PLAN  status: active  holder: {key}  version: 2"
    assert "    Guard: command `test -f PLAN.md` → false (exited 1)" in show
    detail = json.loads(smllm(["instance", "show", "GH-4", "--json"], project, env).out)
    assert [h["event"] for h in detail["history"]] == ["enter", "planned"]
    assert detail["history"][1]["params"] == {"size": "small"}
    missing = smllm(["instance", "show", "GH-9"], project, env)
    assert (missing.code, missing.err) == (1, "error: no instance GH-9\n")


def test_config_option_is_ignored_for_a_session(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    other = tmp_path / "other.toml"
    other.write_text("[machines]\nfiles = []\n")
    key = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    ran = smllm(
        ["--config", str(other), "fire", "--session", key, "enter", "--param", "stateMachine=dev"],
        project,
        env,
    )
    assert ran.code == 0
    assert ran.err.startswith("note: --config is ignored for a call that names a session")
    ran = smllm(
        ["fire", "enter", "--config", str(other), "--param", "stateMachine=dev"], project, env
    )
    assert ran.code == 1 and "No state machines" not in ran.out
    assert (
        "\nerror: enter param stateMachine must name a configured state machine, and none is "
        'configured (got "dev"); add one with smllm new ID --write\n'
    ) in ran.out


def test_demo(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["demo"], tmp_path, env)
    assert ran.code == 0, ran.err
    assert ran.out.count("$ smllm ") == 8
    assert "Guard: command `test -f PLAN.md` → false (exited 1)" in ran.out
    assert "Completed issue GH-12. You are now in idle." in ran.out
    assert ran.out.endswith(
        "\n# Done: issue GH-12 is completed. Each block told the agent what to do next, and the"
        " guard kept it in PLAN until PLAN.md existed.\n"
    )
    assert not list(Path(env["XDG_STATE_HOME"]).glob("**/*.db"))  # the demo kept its state


_WORDS = ("fire", "session", "show", "--session", "--param", "--json", "--host", "--params",
          "--config", "c.toml", "sm-abc123", "yield", "a=b", "x=-1", "-x", "--", "--param=a=b",
          "--ses", "enter", "stateMachine=dev", "", "statusline", "--color", "always",
          "auto", "nope", "harness", "hook", "claude", "stop")  # fmt: skip


@settings(max_examples=2000, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=7))
def test_fast_paths_read_argv_as_the_parser_does(argv: list[str]) -> None:
    # `session show` and `fire` skip argparse; where they answer, it's the parser's answer
    from smllm.cli.common import Exit
    from smllm.cli.main import _fast_args
    from smllm.cli.parser import parse

    fast = _fast_args(list(argv))
    if fast is None:
        return
    try:
        slow = parse(argv)
    except Exit as exc:
        raise AssertionError(
            f"the fast path took {argv}, which the parser refuses: {exc}"
        ) from None
    assert vars(fast) == vars(slow), argv


def test_fast_paths_are_taken() -> None:
    from smllm.cli.main import _fast_args

    for argv in (
        ["session", "show", "sm-abc123"],
        ["session", "show", "sm-abc123", "--json"],
        ["fire", "yield"],
        ["fire", "--session", "sm-abc123", "enter", "--param", "stateMachine=dev", "--json"],
        ["fire", "--host", "ci-passed", "--session", "sm-abc123"],
        ["statusline"],
        ["statusline", "--json", "--session", "sm-abc123", "--color", "never"],
        ["harness", "hook", "claude", "stop"],
    ):
        assert _fast_args(argv) is not None, argv


def test_new_write_keeps_a_config_bom(tmp_path: Path, env: dict[str, str]) -> None:
    """A config that starts with a UTF-8 BOM (smllm reads it) is edited with the BOM kept."""
    config = tmp_path / ".smllm" / "config.toml"
    config.parent.mkdir()
    config.write_bytes(b"\xef\xbb\xbf# mine\n[machines]\nfiles = []\n")
    ran = smllm(["new", "review", "--write"], tmp_path, env)
    assert ran.code == 0, ran.err
    assert config.read_bytes() == b'\xef\xbb\xbf# mine\n[machines]\nfiles = ["review.smllm.yaml"]\n'
    assert smllm(["validate"], tmp_path, env).code == 0


def test_new_write_edits_a_linked_config_in_place(tmp_path: Path, env: dict[str, str]) -> None:
    """A --config that is a symlink (dotfiles kept elsewhere) stays a link, and its target keeps
    its mode: the edit goes to the file the link leads to."""
    import os
    import stat

    real = tmp_path / "dotfiles" / "smllm.toml"
    real.parent.mkdir()
    real.write_text("[machines]\nfiles = []\n")
    real.chmod(0o600)
    config = tmp_path / "config.toml"
    config.symlink_to(real)
    ran = smllm(["--config", str(config), "new", "review", "--write"], tmp_path, env)
    assert ran.code == 0, ran.err
    assert config.is_symlink() and os.readlink(config) == str(real)
    assert real.read_text() == '[machines]\nfiles = ["review.smllm.yaml"]\n'
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_an_explicit_config_that_is_not_a_file(tmp_path: Path, env: dict[str, str]) -> None:
    import os

    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    for args in (["--config", str(fifo), "validate"], ["--config", str(tmp_path), "graph"]):
        ran = smllm(args, tmp_path, env)
        assert (ran.code, ran.out) == (2, ""), ran
        assert ran.err == f"error: config file {args[1]} is not a regular file\n"
    ran = smllm(["--config", str(tmp_path / "nope.toml"), "validate"], tmp_path, env)
    assert ran.err == f"error: config file {tmp_path / 'nope.toml'} not found\n"


def test_main_runs_without_the_cyclic_collector_and_gives_it_back(
    project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command doesn't pay for the cyclic GC (hook path speed); an in-process caller gets
    the collector back as it was, also after an error."""
    import gc

    from smllm.cli import main as cli_main

    seen: list[bool] = []
    monkeypatch.setattr(cli_main, "_dispatch", lambda args: seen.append(gc.isenabled()) or 0)
    monkeypatch.chdir(project)
    assert gc.isenabled()
    assert cli_main.main(["session", "list"]) == 0
    assert seen == [False] and gc.isenabled()
    monkeypatch.setattr(cli_main, "_dispatch", lambda args: 1 / 0)
    assert cli_main.main(["session", "list"]) == 2
    assert gc.isenabled()
    gc.disable()
    try:
        cli_main.main(["session", "list"])
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("args", [[], ["--config", "x.toml"]])
def test_no_command_is_bad_usage(tmp_path: Path, env: dict[str, str], args: list[str]) -> None:
    """Bad usage (cli-and-harnesses.md §1): exit 2, stdout empty, the usage and an `error:`
    line on stderr (the campaign's fuzz found the help on stdout and no error line)."""
    ran = smllm(args, tmp_path, env)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err.startswith("usage: smllm ")
    assert ran.err.endswith("\nerror: no command given; smllm --help lists the commands\n")
