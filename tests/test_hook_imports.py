"""The hook path stays light: with a warm compiled-machine cache, `smllm session show` and
`smllm fire` import no YAML parser, no jsonschema, no tomlkit, no MCP/PostgreSQL/tokenizer
package and no CLI framework, nor the slower standard modules (json, re, enum, pickle,
argparse); after an edit of the machine file the YAML is parsed again.

Each check runs the real `python -m smllm` in a new process, wrapped so that the names in
`sys.modules` are written to a file when the process exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Ran, smllm
from helpers.imported_modules import _ENDINGS, forbidden, loaded, slow


@pytest.fixture
def baseline(project: Path, env: dict[str, str], tmp_path: Path) -> set[str]:
    ran, names = loaded(None, project, env, tmp_path / "modules-bare.txt")
    assert ran.code == 0, ran.err
    assert "sys" in names  # the wrapper works
    return names


def _enter(project: Path, env: dict[str, str]) -> str:
    """A session holding a new dev instance; the call also builds the compiled cache."""
    ran = smllm(
        ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-7", "--json"],
        project,
        env,
    )
    assert ran.code == 0, ran.err
    key: str = json.loads(ran.out)["session"]
    return key


def _cache_files(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["XDG_CACHE_HOME"]) / "smllm").glob("machines-*"))


def test_warm_session_show_imports_nothing_heavy(
    project: Path, env: dict[str, str], tmp_path: Path, baseline: set[str]
) -> None:
    key = _enter(project, env)
    assert _cache_files(env), "the compiled machine cache was not written"
    warm = smllm(["session", "show", key], project, env)
    assert warm.code == 0, warm.err

    ran, names = loaded(["session", "show", key], project, env, tmp_path / "modules.txt")

    assert ran.code == 0, ran.err
    assert ran.out == warm.out  # the wrapper runs the real command
    assert "dev › PLAN" in ran.out
    assert "smllm.machine.configs.cache" in names
    assert forbidden(names, baseline) == []
    assert "smllm.machine.sources.yamltree" not in names
    # a warm cache reads no config, and nothing on the way imports the config reader
    assert "smllm.machine.configs.config" not in names
    # the store reaches SQLite through _sqlite3: the sqlite3 package imports datetime (~2 ms)
    # for adapters smllm never uses, and a view reads no clock
    assert "_sqlite3" in names
    assert not {"sqlite3", "sqlite3.dbapi2", "datetime"} & (names - baseline)
    assert _ENDINGS[str(tmp_path / "modules.txt")] == "os._exit"  # a hot command
    assert slow(["session", "show", key], project, env, tmp_path) == []


def test_warm_session_show_in_idle_imports_nothing_heavy(
    project: Path, env: dict[str, str], tmp_path: Path, baseline: set[str]
) -> None:
    new = smllm(["session", "new", "--json"], project, env)
    assert new.code == 0, new.err
    key = json.loads(new.out)["session"]
    assert smllm(["session", "show", key], project, env).code == 0

    ran, names = loaded(["session", "show", key], project, env, tmp_path / "modules.txt")

    assert ran.code == 0, ran.err
    assert "idle" in ran.out
    assert forbidden(names, baseline) == []
    assert slow(["session", "show", key], project, env, tmp_path) == []


def test_statusline_imports_nothing_heavy(
    project: Path, env: dict[str, str], tmp_path: Path, baseline: set[str]
) -> None:
    """The status line runs on every redraw of Claude's status bar: no argparse, no json."""
    key = _enter(project, env)
    assert smllm(["statusline", "--session", key], project, env).code == 0
    argv = ["statusline", "--session", key, "--color", "never"]
    ran, names = loaded(argv, project, env, tmp_path / "m.txt")
    assert ran.code == 0 and "dev › PLAN" in ran.out, ran
    assert forbidden(names, baseline) == []
    assert _ENDINGS[str(tmp_path / "m.txt")] == "os._exit"  # a hot command
    # the status of a held session reads no events: no replies, rules or block text
    assert not {"smllm.engine.reply", "smllm.engine.rules", "smllm.text.block"} & names
    assert "smllm.engine.recover" not in names  # held: nothing to recover
    # nor the App, nor the machines: their summary, in the compiled cache's marshal header
    assert not {"smllm.api.app", "smllm.api.system", "smllm.machine.model", "_pickle"} & names
    assert "smllm.machine.summary" in names
    assert slow(["statusline", "--session", key, "--json"], project, env, tmp_path) == []


@pytest.mark.parametrize(
    "event",
    [
        ["yield"],
        ["yield", "--param", "note=waiting for review"],
        ["planned", "--param", "size=small"],  # an enum string param: checked without jsonschema
    ],
    ids=["yield", "yield-note", "planned-enum"],
)
def test_warm_fire_imports_nothing_heavy(
    project: Path, env: dict[str, str], tmp_path: Path, baseline: set[str], event: list[str]
) -> None:
    key = _enter(project, env)

    ran, names = loaded(["fire", "--session", key, *event], project, env, tmp_path / "mods.txt")

    assert ran.code == 0, ran.err
    assert forbidden(names, baseline) == []
    # not a hot command: a fire ends as Python does (exit handlers and finalizers run)
    assert _ENDINGS[str(tmp_path / "mods.txt")] == "exit handlers"
    if event[0] == "yield":  # planned runs a guard command: subprocess needs signal, enum, re
        key = _enter(project, env)  # the first call moved the session on
        assert slow(["fire", "--session", key, *event], project, env, tmp_path) == []


@pytest.mark.parametrize(
    "new",
    ["Write a short plan for the issue", "Write a PLAN for the issue"],
    ids=["longer", "same-size"],
)
def test_edited_machine_is_parsed_again(
    project: Path, env: dict[str, str], tmp_path: Path, baseline: set[str], new: str
) -> None:
    key = _enter(project, env)
    _, names = loaded(["session", "show", key], project, env, tmp_path / "before.txt")
    assert forbidden(names, baseline) == []

    machine = project / ".smllm" / "dev.smllm.yaml"
    text = machine.read_text()
    old = "Write a plan for the issue"
    assert old in text
    machine.write_text(text.replace(old, new))

    ran, names = loaded(["session", "show", key], project, env, tmp_path / "after.txt")

    assert ran.code == 0, ran.err
    assert new in ran.out  # the edit is seen …
    assert "yaml" in names  # … because the file was parsed again: the test can fail
    assert "yaml" in forbidden(names, baseline)

    # and the rebuilt cache is warm again
    ran, names = loaded(["session", "show", key], project, env, tmp_path / "again.txt")
    assert ran.code == 0, ran.err
    assert new in ran.out
    assert forbidden(names, baseline) == []


def test_prompt_files_are_read_without_slow_modules(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    # the agent's instructions from a prompt file: read and normalised on the hook path
    machine = project / ".smllm" / "dev.smllm.yaml"
    text = machine.read_text()
    start = text.index('{ text: "Write a plan for the issue')
    end = text.index("}", start) + 1
    machine.write_text(text[:start] + "{ file: plan.md }" + text[end:])
    (project / ".smllm" / "plan.md").write_text("Plan from a file.\r\n\r\n")
    key = _enter(project, env)
    shown = smllm(["session", "show", key], project, env)
    assert "Plan from a file.\n" in shown.out
    assert slow(["session", "show", key], project, env, tmp_path) == []


# -- the hooks (cli-and-harnesses.md §5): every harness, every hook -----------------------------

HOOK_HARNESSES = ["claude", "codex", "copilot", "opencode"]
#: (hook, what the session is doing, what the hook answers)
HOOK_CASES = [
    ("session-start", "new", "context"),
    ("session-start", "held", "context"),
    ("user-prompt-submit", "held", "{}"),  # nothing to clear
    ("user-prompt-submit", "blocked", "{}"),  # clears the block
    ("stop", "held", "block"),
    ("stop", "blocked", "runaway"),
    ("stop", "idle", "{}"),
    ("stop", "yielded", "{}"),
    ("stop", "unbound", "{}"),
]


def _hook_input(name: str, host: str, project: Path, **more: Any) -> str:
    field = "sessionId" if name == "copilot" else "session_id"
    return json.dumps({field: host, "cwd": str(project), **more})


def _hook(name: str, hook: str, stdin: str, project: Path, env: dict[str, str]) -> Ran:
    return smllm(["harness", "hook", name, hook], project, env, stdin=stdin)


def _hook_session(name: str, doing: str, project: Path, env: dict[str, str]) -> None:
    """Bind host session `h1` of harness `name` and bring it to `doing`."""
    if doing in ("new", "unbound"):
        return
    ran = _hook(name, "session-start", _hook_input(name, "h1", project), project, env)
    assert ran.code == 0, ran
    answer = json.loads(ran.out)
    text = answer.get("additionalContext") or answer["hookSpecificOutput"]["additionalContext"]
    key = text.split("\n")[1].split(" ")[1]
    if doing == "idle":
        return
    fire = ["fire", "--session", key]
    entered = smllm([*fire, "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-7"],
                    project, env)  # fmt: skip
    assert entered.code == 0, entered
    if doing == "yielded":
        assert smllm([*fire, "yield"], project, env).code == 0
    if doing == "blocked":
        stop = _hook(name, "stop", _hook_input(name, "h1", project, stop_hook_active=False),
                     project, env)  # fmt: skip
        assert "block" in stop.out, stop


@pytest.mark.parametrize("name", HOOK_HARNESSES)
@pytest.mark.parametrize(
    ("hook", "doing", "answer"), HOOK_CASES, ids=[f"{h}-{d}" for h, d, _ in HOOK_CASES]
)
def test_hooks_import_nothing_heavy(
    project: Path,
    env: dict[str, str],
    tmp_path: Path,
    baseline: set[str],
    name: str,
    hook: str,
    doing: str,
    answer: str,
) -> None:
    """Hooks run on every prompt and stop: the warm path imports no heavy package and none of
    the slower standard modules; the prompt hook and allowing stops load no config."""
    _hook_session(name, doing, project, env)
    smllm(["validate"], project, env)  # the compiled machine cache is warm
    stdin = _hook_input(name, "h1", project, stop_hook_active=doing == "blocked", prompt="next")
    args = ["harness", "hook", name, hook]

    ran, names = loaded(args, project, env, tmp_path / "hook.txt", stdin=stdin)

    assert ran.code == 0, ran.err
    if answer == "context":
        assert '"additionalContext":"<smllm>' in ran.out
    elif answer == "block":
        assert ran.out.startswith('{"decision":"block","reason":"<smllm>')
    else:
        assert ran.out == "{}\n"
        assert ran.err.startswith("<smllm>") == (answer == "runaway")
    assert "smllm.harness.hook" in names  # the hook ran: the test can fail
    assert forbidden(names, baseline) == []
    assert not {"argparse", "smllm.cli.parser"} & names
    # datetime.py costs ~2 ms: the clock is read through _datetime (smllm.clock); `types`
    # (argparse's namespace without argparse), `select` (stdin that is there already) and
    # `collections.abc` (annotations only) aren't needed either
    unneeded = {"datetime", "types", "select", "collections.abc"} & (names - baseline)
    assert not unneeded, sorted(unneeded)
    # and the process skips the interpreter's teardown (smllm.cli.main._exit_now)
    assert _ENDINGS[str(tmp_path / "hook.txt")] == "os._exit"
    if hook != "session-start":  # no config lookup: the bound session names its configs
        assert "smllm.machine.configs.config" not in names
    if hook == "user-prompt-submit" or doing in ("idle", "unbound"):
        assert "smllm.machine.configs.cache" not in names, "loaded the configs"
    if hook == "user-prompt-submit" and doing == "held":  # nothing to clear: no engine
        assert "smllm.api.app" not in names
    if doing == "yielded":  # a yielded stop reads the instance's holder, not the engine
        assert not {"smllm.api.app", "smllm.engine.view", "smllm.engine.reply"} & names
        # nor the machines: their summary, in the compiled cache's marshal header
        assert not {"smllm.machine.model", "_pickle"} & names
        assert "smllm.machine.summary" in names
    if hook == "user-prompt-submit":  # clearing a yield or blocks needs no machine either
        assert not {"smllm.api.app", "smllm.machine.model", "smllm.engine.view"} & names
    if doing == "unbound":
        assert "smllm.api.app" not in names
    # the run above moved the session on: back to where it was, for the run without site
    if hook == "stop" and doing == "held":
        prompt = _hook_input(name, "h1", project, prompt="go on")
        assert _hook(name, "user-prompt-submit", prompt, project, env).code == 0
    if hook == "user-prompt-submit" and doing == "blocked":
        again = _hook_input(name, "h1", project, stop_hook_active=False)
        assert "block" in _hook(name, "stop", again, project, env).out
    assert slow(args, project, env, tmp_path, stdin=stdin) == []


def test_the_mcp_server_answers_initialize_before_loading_the_api() -> None:
    """`smllm mcp`'s reader answers initialize and tools/list while the rest loads: what its
    module imports before the reader starts is the wire alone (no API, engine, store or SDK)."""
    code = "import sys, smllm.mcp.server; print(' '.join(sorted(sys.modules)))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    loaded = set(ran.stdout.split())
    ours = {m for m in loaded if m.startswith("smllm.")}
    assert ours == {"smllm.jsontext", "smllm.mcp", "smllm.mcp.server", "smllm.mcp.texts",
                    "smllm.mcp.wire"}, ours  # fmt: skip
    assert not loaded & {"mcp", "anyio", "pydantic", "_sqlite3"}, loaded & {"mcp", "anyio"}


#: (hook, what the session is doing, whether it must read an instance)
PG_HOOK_CASES = [
    ("user-prompt-submit", "held", False),
    ("stop", "idle", False),
    ("stop", "unbound", False),
    ("stop", "held", True),
    ("stop", "yielded", True),  # is the instance still the session's? only the store knows
    ("session-start", "held", True),
]


@pytest.mark.parametrize(
    ("hook", "doing", "reads"), PG_HOOK_CASES, ids=[f"{h}-{d}" for h, d, _ in PG_HOOK_CASES]
)
def test_hooks_of_a_postgres_project_pay_for_psycopg_only_to_read(
    project: Path,
    env: dict[str, str],
    tmp_path: Path,
    pg_url: str,
    pg_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    hook: str,
    doing: str,
    reads: bool,
) -> None:
    """issue 11 §1: a hook of a PostgreSQL project imports psycopg only when it must read an
    instance (a holding session's stop, its start); a prompt or an idle stop doesn't."""
    from conftest import use_postgres

    use_postgres(project, pg_url, pg_namespace, env, monkeypatch)
    _hook_session("claude", doing, project, env)
    smllm(["validate"], project, env)
    stdin = _hook_input("claude", "h1", project, stop_hook_active=False, prompt="next")
    ran, names = loaded(["harness", "hook", "claude", hook], project, env, tmp_path / "h.txt",
                        stdin=stdin)  # fmt: skip
    assert ran.code == 0, ran.err
    assert "smllm.harness.hook" in names
    if hook == "stop" and doing == "held":
        assert ran.out.startswith('{"decision":"block","reason":"<smllm>'), ran.out
    assert ("psycopg" in names) == reads
    assert ("smllm.store.postgres" in names) == reads
