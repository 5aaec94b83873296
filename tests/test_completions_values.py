"""The values only smllm knows, completed in each shell (issue 20 §8): machine ids, session keys
(most recently active first) and the events a session's state offers, asked of the hidden helper
`smllm __complete KIND [WORD…]` at the TAB; and that helper's silence when it can't answer.

The shells are driven as in tests/test_completions.py, in a project holding the example machine
(`dev`), with two sessions: A in PLAN of issue GH-1 (offering planned, yield, pause, unmatched)
and B in idle (offering enter); session keys (most recently active first) and events are
offered in smllm's order, which no shell's sorting gives here. The `smllm` the scripts run
logs each call, so each line is checked for what it asked too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import smllm
from helpers.shell_completions import completions_of, fish_form, logged_smllm, script

PLAN_EVENTS = ["planned", "yield", "pause", "unmatched"]


class World:
    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.project = project
        ran = smllm(
            ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-1", "--json"],
            project,
            env,
        )
        assert ran.code == 0, ran.err
        self.a: str = json.loads(ran.out)["session"]
        ran = smllm(["session", "new", "--json"], project, env)
        assert ran.code == 0, ran.err
        self.b: str = json.loads(ran.out)["session"]
        # the most recently active first, in an order that isn't the keys' sorted order: when
        # it would be, A yields (a write, which leaves its state and events as they were)
        self.recent = [self.b, self.a]
        if self.b < self.a:
            assert smllm(["fire", "--session", self.a, "yield"], project, env).code == 0
            self.recent = [self.a, self.b]
        # a second config, read only when a line names it: one machine, `ops`
        dev = (project / ".smllm" / "dev.smllm.yaml").read_text()
        (project / ".smllm" / "ops.smllm.yaml").write_text(dev.replace("id: dev", "id: ops", 1))
        (project / "ops.toml").write_text('[machines]\nfiles = [".smllm/ops.smllm.yaml"]\n')

    def lines(self) -> dict[str, tuple[list[str], list[str]]]:
        """line → (the words offered, in order; the kinds asked of smllm, in order)."""
        a, b = self.a, self.b
        sessions = self.recent
        return {
            "smllm session show ": (sessions, ["sessions"]),
            f"smllm session show {a[:-1]}": ([a], ["sessions"]),
            "smllm fire --session ": (sessions, ["sessions"]),
            "smllm fire --json --session=": (sessions, ["sessions"]),
            "smllm statusline --session ": (sessions, ["sessions"]),
            "smllm statusline --color never --session sm-": (sessions, ["sessions"]),
            f"smllm fire --session {a} ": (PLAN_EVENTS, ["events"]),
            f"smllm fire --session {a} p": (["planned", "pause"], ["events"]),
            f"smllm fire --session={a} --json ": (PLAN_EVENTS, ["events"]),
            f"smllm fire --json --session {b} ": (["enter"], ["events"]),
            "smllm fire ": (["enter"], ["events"]),
            "smllm fire --session sm-nosuch ": ([], ["events"]),
            f"smllm fire --session {a} planned --": (
                ["--config", "--help", "--host", "--json", "--param", "--params", "--session"],
                [],
            ),
            "smllm graph ": (["dev"], ["machines"]),
            "smllm graph --dot d": (["dev"], ["machines"]),
            "smllm instance list --machine ": (["dev"], ["machines"]),
            "smllm instance show --json --machine ": (["dev"], ["machines"]),
            "smllm graph --config ops.toml ": (["ops"], ["machines"]),
            "smllm --config ops.toml instance list --machine=": (["ops"], ["machines"]),
            "smllm fire --param stateMachine=": (["dev"], ["machines"]),
            f"smllm fire --session {b} enter --param stateMachine=d": (["dev"], ["machines"]),
            "smllm fire --param issueId=": ([], []),
        }


@pytest.fixture
def world(project: Path, env: dict[str, str]) -> World:
    return World(project, env)


def asked(log: Path) -> list[str]:
    """The kinds the scripts asked of smllm, in order (each call is `__complete KIND …`)."""
    calls = [line.split(" ") for line in log.read_text().splitlines()]
    assert all(call[0] == "__complete" for call in calls), calls
    return [call[1] for call in calls]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_values_from_smllm(shell: str, world: World, tmp_path: Path, env: dict[str, str]) -> None:
    path = script(shell, tmp_path, env)
    logged, log = logged_smllm(tmp_path, env)
    want = world.lines()
    got: dict[str, list[str]] = {}
    calls: dict[str, list[str]] = {}
    for line in want:  # one line at a time, so that each line's calls are its own
        got.update(completions_of(shell, path, [line], world.project, logged))
        calls[line] = asked(log)
        log.write_text("")
    fish = shell == "fish"
    offered = {line: fish_form(line, w) if fish else w for line, (w, _) in want.items()}
    options = f"smllm fire --session {world.a} planned --"  # in no particular order
    assert {line: sorted(w) if line == options else w for line, w in got.items()} == offered
    assert calls == {line: kinds for line, (_, kinds) in want.items()}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_nothing_outside_a_project(shell: str, tmp_path: Path, env: dict[str, str]) -> None:
    """No config, no store: the lines that ask smllm get nothing, and no shell says a word
    on stderr (the drivers check it)."""
    path = script(shell, tmp_path, env)
    logged, log = logged_smllm(tmp_path, env)
    lines = ["smllm graph ", "smllm session show ", "smllm fire --session sm-abcdef "]
    got = completions_of(shell, path, lines, tmp_path, logged)
    assert got == {line: [] for line in lines}
    assert sorted(asked(log)) == ["events", "machines", "sessions"]


def helper(args: Sequence[str | bytes], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    ran = subprocess.run(
        [sys.executable, "-m", "smllm", "__complete", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=60,
    )
    return ran.returncode, ran.stdout.decode(), ran.stderr.decode()


QUIET = (0, "", "")


def test_the_helper_answers(world: World, env: dict[str, str]) -> None:
    here = world.project
    assert helper(["sessions"], here, env) == (0, "".join(f"{k}\n" for k in world.recent), "")
    events = ["events", "fire", "--json", "--session", world.a]
    assert helper(events, here, env) == (0, "".join(f"{e}\n" for e in PLAN_EVENTS), "")
    assert helper(["events", "fire"], here, env) == (0, "enter\n", "")
    assert helper(["machines"], here, env) == (0, "dev\n", "")
    assert helper(["machines", "--config=ops.toml"], here, env) == (0, "ops\n", "")
    assert helper(["machines"], here, {**env, "SMLLM_CONFIG": "ops.toml"}) == (0, "ops\n", "")
    # a session whose last call ended after its client stopped waiting tells it once, at its
    # next reply (App.view clears the mark): a TAB doesn't take that from the agent
    from smllm.api.app import App

    assert App(cwd=str(here)).mark_late(world.a, "planned")
    assert helper(events, here, env) == (0, "".join(f"{e}\n" for e in PLAN_EVENTS), "")
    shown = smllm(["session", "show", world.a], here, env)
    assert shown.out.startswith("note: your last call (planned) was carried out after"), shown


def test_the_helper_is_quiet_when_it_cant_answer(
    world: World, tmp_path: Path, env: dict[str, str]
) -> None:
    """Any error prints nothing and exits 0: no config, an unknown session, a missing
    --config, a config that can't be read, a damaged or unreachable store, an unknown kind,
    a word that isn't UTF-8."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for args in (["machines"], ["sessions"], ["events", "fire", "--session", "sm-abcdef"]):
        assert helper(args, outside, {**env, "XDG_STATE_HOME": str(tmp_path / "s")}) == QUIET
    here = world.project
    assert helper(["events", "--session", "sm-nosuch"], here, env) == QUIET
    assert helper(["machines", "--config", "missing.toml"], here, env) == QUIET
    (outside / "bad.toml").write_text("[machines\n")
    assert helper(["machines", "--config", "bad.toml"], outside, env) == QUIET
    assert helper([], here, env) == QUIET
    assert helper(["colours"], here, env) == QUIET
    assert helper(["events", "--session", b"sm-\xff"], here, env) == QUIET
    damaged = tmp_path / "damaged"
    (damaged / "smllm").mkdir(parents=True)
    (damaged / "smllm" / "user.db").write_bytes(b"not a database, " * 512)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for state in (damaged, a_file):
        bad = {**env, "XDG_STATE_HOME": str(state)}
        assert helper(["sessions"], here, bad) == QUIET
        assert helper(["events", "--session", world.a], here, bad) == QUIET


def test_the_helper_stays_light(world: World, env: dict[str, str]) -> None:
    """It runs at every TAB: none of argparse (the parser), YAML, JSON Schema, pickle or the
    engine's fire path is imported for any kind (the machines' cache is warm)."""
    assert helper(["machines"], world.project, env)[1] == "dev\n"  # warms the cache
    heavy = {"argparse", "yaml", "jsonschema", "pickle", "smllm.cli.parser", "smllm.engine.fire"}
    code = (
        "import sys\nfrom smllm.cli.main import main\n"
        "main(sys.argv[1:])\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    for args in (["sessions"], ["machines"], ["events", "--session", world.a]):
        ran = subprocess.run(
            [sys.executable, "-c", code, "__complete", *args],
            cwd=world.project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 0 and ran.stdout, ran.stderr
        assert heavy & set(ran.stderr.split()) == set(), args


def test_the_helper_is_hidden(env: dict[str, str], tmp_path: Path) -> None:
    """Hidden from --help, as `harness hook` is (and neither is offered: `smllm _` and
    `smllm harness ` in tests/test_completions.py)."""
    ran = smllm(["--help"], tmp_path, env)
    assert ran.code == 0 and "__complete" not in ran.out
