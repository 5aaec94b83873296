"""Configs (machine-format.md §1), the idle text, the state folder, and what commands see:
the action order of §3 and the SMLLM_* environment of §4."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import smllm
from helpers.scenario import Scenario

TINY = """\
id: {id}
description: {desc}
initial: A
meta: {{ smllm: 1 }}
states:
  A:
    meta: {{ entryPoint: true }}
    entry: {{ type: prompt, params: {{ text: "{desc}" }} }}
"""


def _write(folder: Path, name: str, mid: str, desc: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(TINY.format(id=mid, desc=desc))


def test_user_and_project_configs_combine(tmp_path: Path, env: dict[str, str]) -> None:
    user = Path(env["XDG_CONFIG_HOME"]) / "smllm"
    _write(user, "mine.smllm.yaml", "mine", "The user's own machine.")
    _write(user, "shared.smllm.yaml", "shared", "The user's copy.")
    (user / "config.toml").write_text(
        '[machines]\nfiles = ["mine.smllm.yaml", '
        '"shared.smllm.yaml"]\n[idle]\non-enter = { text = '
        '"User idle text." }\n'
    )
    project = tmp_path / "p"
    _write(project / ".smllm", "shared.smllm.yaml", "shared", "The project's copy.")
    (project / ".smllm" / "config.toml").write_text(
        '[machines]\nfiles = ["shared.smllm.yaml"]\n[idle]\non-enter = { file = "idle.md" }\n'
    )
    (project / "sub").mkdir()
    ran = smllm(["session", "new"], project / "sub", env)
    # the project's shared replaces the user's at the project's position; its idle text wins
    assert ran.out.split("\n")[2:8] == [
        "Prompt failed: idle.md: not found",
        "State machines:",
        "- mine: The user's own machine.",
        "    instance id param ref",
        "    starts at: A; entry points: A",
        "- shared: The project's copy.",
    ]
    (project / ".smllm" / "idle.md").write_text("Pick a machine.\r\n\r\n")
    ran = smllm(["session", "new"], project, env)
    assert "<instructions>\nPick a machine.\n</instructions>\nState machines:" in ran.out
    key = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    # a broken project config withdraws the user's machines too (CFG-7)
    (project / ".smllm" / "config.toml").write_text("[machines\n")
    ran = smllm(["session", "show", key], tmp_path, env)
    assert "No state machines are configured." in ran.out
    assert ran.err == (
        "note: p/.smllm/config.toml has errors, so machines in it aren't configured; "
        "smllm validate tells why\n"
    )
    # a project machine file with errors withdraws the user's machine of that id (CFG-8)
    (project / ".smllm" / "config.toml").write_text('[machines]\nfiles = ["shared.smllm.yaml"]\n')
    (project / ".smllm" / "shared.smllm.yaml").write_text("id: shared\ninitial: [\n")
    ran = smllm(["session", "show", key], tmp_path, env)
    assert "- mine:" in ran.out and "- shared:" not in ran.out


def test_state_dir_and_gitignore(tmp_path: Path, env: dict[str, str]) -> None:
    project = tmp_path / "p"
    _write(project / ".smllm", "a.smllm.yaml", "a", "A.")
    (project / ".smllm" / "config.toml").write_text(
        '[machines]\nfiles = ["a.smllm.yaml"]\n[state]\ndir = "../.work/smllm"\n'
    )
    ran = smllm(["fire", "enter", "--param", "stateMachine=a"], project, env)
    assert ran.code == 0, ran.err
    state = project / ".work" / "smllm"
    assert (state / "smllm.db").exists()
    assert (state / ".gitignore").read_text() == "*\n"
    assert not (project / ".smllm" / "state").exists()


def test_sessions_reload_their_own_configs(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    key = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = smllm(["fire", "--session", key, "enter", "--param", "stateMachine=dev"], elsewhere, env)
    assert ran.code == 0 and "dev › PLAN" in ran.out


ORDER = """\
id: order
initial: S
meta:
  smllm: 1
  events:
    go: { params: { type: object, properties: { prURL: { type: string }, n: { type: integer } } } }
  sharedActions:
    - states: [S, T]
      position: before
      entry: { type: command, params: { run: "echo shared-before-entry-$SMLLM_STATE >> log" } }
      exit: { type: command, params: { run: "echo shared-before-exit-$SMLLM_STATE >> log" } }
    - states: [S, T]
      entry: { type: command, params: { run: "echo shared-after-entry-$SMLLM_STATE >> log" } }
      exit:
        - { type: command, params: { run: "echo shared-after-exit-$SMLLM_STATE >> log" } }
states:
  S:
    meta: { entryPoint: true }
    entry: { type: command, params: { run: "echo S-entry >> log" } }
    exit:
      - { type: command, params: { run: "exit 3" } }
      - { type: prompt, params: { text: "Left S." } }
      - { type: command, params: { run: "echo never >> log" } }
    on:
      go:
        - target: T
          guard: { type: command, params: { run: "env | grep ^SMLLM_ | sort > guard-env" } }
          actions:
            - { type: command, params: { run: "env | grep ^SMLLM_ | sort > action-env" } }
            - { type: command, params: { run: "echo go-actions >> log" } }
        - { target: S, reenter: true }
  T:
    entry:
      - { type: command, params: { run: "echo T-entry >> log" } }
      - { type: command, params: { run: [sh, -c, "echo list-form $HOME >> log"] } }
    on:
      go: S
"""


def test_action_order_and_environment(tmp_path: Path, env: dict[str, str]) -> None:
    machine = tmp_path / "order.smllm.yaml"
    machine.write_text(ORDER)
    sc = Scenario(tmp_path / "p", machine)
    key = sc.session()
    sc.fire(key, "enter", stateMachine="order")
    (sc.folder / "log").write_text("")
    result = sc.fire(key, "go", prURL="$(touch pwned)", n="7")
    assert result.ok
    assert not (sc.folder / "pwned").exists()  # params reach commands only as variables
    assert (sc.folder / "log").read_text().split() == [
        "shared-before-exit-S",
        "shared-after-exit-S",
        "go-actions",
        "shared-before-entry-T",
        "T-entry",
        "list-form",
        env["HOME"],
        "shared-after-entry-T",
    ]
    assert "Action failed: S exit[0] command: exited 3" in result.text()
    assert "<instructions>\nLeft S.\n</instructions>" in result.text()
    guard_env = (sc.folder / "guard-env").read_text().splitlines()
    assert guard_env == [
        "SMLLM_EVENT=go",
        "SMLLM_INSTANCE=i-000001",
        "SMLLM_MACHINE=order",
        "SMLLM_PARAM_N=7",
        "SMLLM_PARAM_PR_URL=$(touch pwned)",
        "SMLLM_REF=",
        f"SMLLM_SESSION={key}",
        "SMLLM_STATE=S",
    ]
    action_env = (sc.folder / "action-env").read_text().splitlines()
    assert "SMLLM_FROM=S" in action_env and "SMLLM_TO=T" in action_env


def test_a_cfg3_hides_no_cfg9(project: Path, env: dict[str, str]) -> None:
    # validation.md §1, every finding at once: a missing machine file doesn't keep validate
    # from checking the idle file of the same config (issue 8, defect 6)
    (project / ".smllm" / "config.toml").write_text(
        '[machines]\nfiles = ["dev.smllm.yaml", "a.smllm.yaml"]\n'
        '[idle]\non-enter = { file = "idle.md" }\n'
    )
    ran = smllm(["validate"], project, env)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        ".smllm/config.toml:2:28: error: machines.files[1]: no machine file a.smllm.yaml "
        "(CFG-3)\n  hint: paths are relative to the config file's folder\n"
        ".smllm/config.toml:4:21: error: idle.on-enter.file: no prompt file idle.md (CFG-9)\n"
        '  hint: give text = "…" or file = "PATH"\n'
        "2 errors, 0 warnings, 0 info\n"
    )


def test_a_cfg3_hides_no_finding_of_the_other_files(project: Path, env: dict[str, str]) -> None:
    """A config with an error adds no machines, but validate still checks the listed files that
    are there (validation.md §1); other commands name every file with errors in one note."""
    smllm_dir = project / ".smllm"
    (smllm_dir / "config.toml").write_text(
        '[machines]\nfiles = ["missing.smllm.yaml", "dev.smllm.yaml"]\n'
    )
    dev = smllm_dir / "dev.smllm.yaml"
    dev.write_text(dev.read_text().replace("initial: PLAN", "initial: PLAN\nbogus: 1"))
    ran = smllm(["validate"], project, env)
    assert ran.code == 1
    assert ran.out.splitlines()[::2] == [
        ".smllm/config.toml:2:10: error: machines.files[0]: no machine file missing.smllm.yaml "
        "(CFG-3)",
        ".smllm/dev.smllm.yaml:4:1: error: bogus: unknown key bogus (allowed: id, description, "
        "initial, meta, states) (FMT-4)",
        "2 errors, 0 warnings, 0 info",
    ]
    ran = smllm(["session", "new"], project, env)
    assert "No state machines are configured." in ran.out
    assert ran.err == (
        "note: .smllm/config.toml, .smllm/dev.smllm.yaml have errors, so machines in them "
        "aren't configured; smllm validate tells why\n"
    )


def test_ids_that_differ_only_in_case_withdraw_the_later(
    project: Path, env: dict[str, str]
) -> None:
    """CFG-5 is an error, and an error withdraws the machine it is found in (validation.md §1):
    the second of `dev` and `Dev` is not configured, the first still is."""
    smllm_dir = project / ".smllm"
    other = (smllm_dir / "dev.smllm.yaml").read_text().replace("id: dev", "id: Dev")
    (smllm_dir / "Dev2.smllm.yaml").write_text(other)
    (smllm_dir / "config.toml").write_text(
        '[machines]\nfiles = ["dev.smllm.yaml", "Dev2.smllm.yaml"]\n'
    )
    ran = smllm(["validate"], project, env)
    assert ran.code == 1
    assert ran.out.startswith(
        ".smllm/Dev2.smllm.yaml:1:5: error: id: machine ids dev and Dev differ only in case "
        "(CFG-5)\n"
    )
    ran = smllm(["graph", "--json"], project, env)
    assert [m["id"] for m in json.loads(ran.out)["machines"]] == ["dev"]
    assert ran.err.startswith("note: .smllm/Dev2.smllm.yaml has errors")


def test_a_broken_project_machine_unloads_the_users_copy(
    project: Path, env: dict[str, str]
) -> None:
    """CFG-8: a project machine file with errors whose id the user's config also defines takes
    the user's machine out too: smllm never falls back to the user's copy."""
    user = Path(env["XDG_CONFIG_HOME"]) / "smllm"
    user.mkdir(parents=True)
    (user / "config.toml").write_text('[machines]\nfiles = ["dev.smllm.yaml"]\n')
    text = (project / ".smllm" / "dev.smllm.yaml").read_text()
    (user / "dev.smllm.yaml").write_text(text)
    assert json.loads(smllm(["graph", "--json"], project, env).out)["machines"][0]["id"] == "dev"
    (project / ".smllm" / "dev.smllm.yaml").write_text(text.replace("initial: PLAN", "initial: X"))
    ran = smllm(["graph", "--json"], project, env)
    assert json.loads(ran.out)["machines"] == []
    ran = smllm(["validate"], project, env)
    assert "the user's machine dev is not loaded either, because .smllm/dev.smllm.yaml has " in (
        ran.out
    )


def test_url_env_is_read_at_each_use_and_never_cached(project: Path, env: dict[str, str]) -> None:
    """`[state] url-env`: whether its variable is set is no fact of the file, so the compiled
    cache never keeps it. Unset, validate says so (CFG-10) and every command that opens the
    store fails with the store's own error (the machines stay configured); set later, with
    the files and so the cache unchanged, validate no longer says it."""
    config = project / ".smllm" / "config.toml"
    config.write_text('[machines]\nfiles = ["dev.smllm.yaml"]\n[state]\nurl-env = "SMLLM_T_URL"\n')
    unset = {k: v for k, v in env.items() if k != "SMLLM_T_URL"}
    said = "state.url-env names SMLLM_T_URL, which is unset or empty"
    ran = smllm(["validate"], project, unset)
    assert (ran.code, ran.err) == (1, "")
    assert ran.out == (
        f".smllm/config.toml:4:11: error: state.url-env: {said} (CFG-10)\n"
        "  hint: give one of dir, url or url-env; namespace goes with url or url-env\n"
        "1 error, 0 warnings, 0 info\n"
    )
    enter = ["fire", "enter", "--params", '{"machine": "dev", "issueId": "GH-1"}']
    for args in (["instance", "list"], enter):
        ran = smllm(args, project, unset)
        assert (ran.code, ran.out, ran.err) == (2, "", f"error: {said}\n"), args
    # a server that isn't there: only the saved instances' check says so, as a warning
    ran = smllm(["validate"], project, {**env, "SMLLM_T_URL": "postgresql://127.0.0.1:9/x"})
    assert ran.code == 0 and "CFG-10" not in ran.out and "(INS-5)" in ran.out, ran.out
