"""`smllm harness hook NAME HOOK` through the real CLI (cli-and-harnesses.md §5, engine.md §9).

Each harness's answer forms; binding at session start; blocked, allowed and runaway stops; the
prompt hook, and Copilot's continuation prompt that must not clear a block; quiet outside
smllm; long texts cut; failures (exit 1, `error: …`, nothing on stdout). Hostile standard
input: test_hook_fuzz.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from helpers.hook_runs import (
    audit,
    block_text,
    context,
    enter,
    held,
    hook,
    payload,
    sessions,
    start,
    stop_process,
)

from smllm.harness.starttext import START_LIMIT, cut_note

HARNESSES = ["claude", "codex", "copilot", "opencode"]


# -- answer forms --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HARNESSES)
def test_answer_forms(name: str, store_project: Path, env: dict[str, str]) -> None:
    project = store_project  # on each backend (conftest.store_project)
    key = start(name, "h1", project, env)
    # session start in a fresh project: a new session in idle, bound to the host session
    ran = hook(name, "session-start", payload(name, "h1", project), project, env)
    text = context(name, ran.out)
    assert text.startswith(f"<smllm>\nsession {key} · idle\nState machines:\n- dev: ")
    [s] = sessions(project, env)
    assert (s["key"], s["harness"], s["hostSession"]) == (key, name, "h1")

    # idle: the stop is allowed
    stop = hook(name, "stop", payload(name, "h1", project, stop_hook_active=False), project, env)
    assert (stop.code, stop.out, stop.err) == (0, "{}\n", "")

    enter(key, project, env)
    stop = hook(name, "stop", payload(name, "h1", project, stop_hook_active=False), project, env)
    assert stop.code == 0 and stop.err == ""
    assert (
        stop.out
        == json.dumps(
            {"decision": "block", "reason": block_text(key)},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        + "\n"
    )
    assert json.loads(stop.out) == {"decision": "block", "reason": block_text(key)}

    prompt = hook(
        name, "user-prompt-submit", payload(name, "h1", project, prompt="go"), project, env
    )
    assert (prompt.code, prompt.out, prompt.err) == (0, "{}\n", "")
    assert audit(key, project, env) == ["bind", "event", "block", "prompt"]


def test_resume_shows_the_same_session(store_project: Path, env: dict[str, str]) -> None:
    project = store_project  # on each backend (conftest.store_project)
    key = held("claude", project, env)
    ran = hook("claude", "session-start", payload("claude", "h1", project), project, env)
    text = context("claude", ran.out)
    assert text.startswith(f"<smllm>\nsession {key} · dev › PLAN · issue GH-1\n<instructions>\n")
    assert "Write a plan for the issue in PLAN.md" in text
    # a new host session (clear, fork) gets a new session in idle
    other = start("claude", "h2", project, env)
    assert other != key
    assert len(sessions(project, env)) == 2
    # bindings are per harness: codex's h1 is not claude's h1
    assert start("codex", "h1", project, env) not in (key, other)


def test_missing_cwd_is_the_process_cwd(project: Path, env: dict[str, str]) -> None:
    ran = hook("claude", "session-start", {"session_id": "h1"}, project, env)
    assert "· idle" in context("claude", ran.out)
    [s] = sessions(project, env)
    assert s["cwd"] == str(project)
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    ran = hook("codex", "session-start", {"session_id": "h1", "cwd": str(project)}, elsewhere, env)
    assert "· idle" in context("codex", ran.out)


# -- stops ---------------------------------------------------------------------------------------


def test_block_then_runaway(store_project: Path, env: dict[str, str]) -> None:
    project = store_project  # on each backend (conftest.store_project)
    key = held("claude", project, env)
    first = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=False), project, env
    )
    assert json.loads(first.out)["reason"] == block_text(key)
    second = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=True), project, env
    )
    assert (second.code, second.out) == (0, "{}\n")
    assert second.err == block_text(key) + "\n"
    assert audit(key, project, env) == ["bind", "event", "block", "runaway"]
    [s] = sessions(project, env)
    assert (s["holding"]["state"], s["blocks"]) == ("PLAN", 1)  # the instance stays

    # the user's next prompt clears the block: the next stop is blocked again
    hook(
        "claude", "user-prompt-submit", payload("claude", "h1", project, prompt="ok"), project, env
    )
    again = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=False), project, env
    )
    assert json.loads(again.out)["reason"] == block_text(key)
    assert audit(key, project, env)[-2:] == ["prompt", "block"]


@pytest.mark.parametrize("active", [None, "yes", 1], ids=["absent", "string", "number"])
def test_an_unknown_continuing_flag_counts_as_continuing(
    project: Path, env: dict[str, str], active: Any
) -> None:
    key = held("claude", project, env)
    extra = {} if active is None else {"stop_hook_active": active}
    first = hook("claude", "stop", payload("claude", "h1", project, **extra), project, env)
    assert "decision" in json.loads(first.out)
    second = hook("claude", "stop", payload("claude", "h1", project, **extra), project, env)
    assert second.out == "{}\n" and second.err == block_text(key) + "\n"


def test_a_false_flag_blocks_twice_then_lets_through(
    store_project: Path, env: dict[str, str]
) -> None:
    project = store_project  # on each backend (conftest.store_project)
    key = held("codex", project, env)
    body = payload("codex", "h1", project, stop_hook_active=False)
    assert "decision" in json.loads(hook("codex", "stop", body, project, env).out)
    assert "decision" in json.loads(hook("codex", "stop", body, project, env).out)
    third = hook("codex", "stop", body, project, env)
    assert third.out == "{}\n" and third.err == block_text(key) + "\n"
    assert audit(key, project, env)[-3:] == ["block", "block", "runaway"]


def test_yield_and_pause_let_the_stop_through(store_project: Path, env: dict[str, str]) -> None:
    project = store_project  # on each backend (conftest.store_project)
    key = held("claude", project, env)
    assert smllm(["fire", "--session", key, "yield"], project, env).code == 0
    ran = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=False), project, env
    )
    assert (ran.out, ran.err) == ("{}\n", "")
    # the user's prompt ends the yield
    hook(
        "claude",
        "user-prompt-submit",
        payload("claude", "h1", project, prompt="more"),
        project,
        env,
    )
    ran = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=False), project, env
    )
    assert json.loads(ran.out)["decision"] == "block"
    assert smllm(["fire", "--session", key, "pause"], project, env).code == 0
    ran = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=True), project, env
    )
    assert (ran.out, ran.err) == ("{}\n", "")
    assert audit(key, project, env).count("runaway") == 0


def test_a_prompt_with_nothing_to_clear_writes_nothing(project: Path, env: dict[str, str]) -> None:
    key = held("claude", project, env)
    before = sessions(project, env)
    ran = hook(
        "claude", "user-prompt-submit", payload("claude", "h1", project, prompt="x"), project, env
    )
    assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    assert sessions(project, env) == before
    assert audit(key, project, env) == ["bind", "event"]


# -- Copilot's continuation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "wrap",
    [
        lambda reason: reason,
        lambda reason: reason.replace("\n", "\r\n") + "\n",
        lambda reason: "<current_datetime>2026-12-03T10:00:00Z</current_datetime>\n\n" + reason,
    ],
    ids=["exact", "crlf", "datetime-before"],
)
def test_copilots_continuation_prompt_keeps_the_block(
    project: Path, env: dict[str, str], wrap: Any
) -> None:
    key = held("copilot", project, env)
    body = payload("copilot", "h1", project, stop_hook_active=False)
    reason = json.loads(hook("copilot", "stop", body, project, env).out)["reason"]
    # Copilot feeds the reason back as the next prompt, and runs its prompt hook with it
    cont = payload("copilot", "h1", project, prompt=wrap(reason), timestamp=1796220977735)
    ran = hook("copilot", "user-prompt-submit", cont, project, env)
    assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    [s] = sessions(project, env)
    assert s["blocks"] == 1
    # so the agent's next stop, still without an event, is a runaway
    body["stop_hook_active"] = True
    ran = hook("copilot", "stop", body, project, env)
    assert ran.out == "{}\n" and ran.err == block_text(key) + "\n"
    assert audit(key, project, env) == ["bind", "event", "block", "runaway"]


@pytest.mark.parametrize(
    "prompt",
    [lambda r: r[:-1], lambda r: r + " please", lambda r: r.replace("PLAN", "WORK"), lambda r: "x"],
    ids=["shorter", "longer", "changed", "other"],
)
def test_a_prompt_that_is_not_the_block_clears_it(
    project: Path, env: dict[str, str], prompt: Any
) -> None:
    key = held("copilot", project, env)
    body = payload("copilot", "h1", project, stop_hook_active=False)
    reason = json.loads(hook("copilot", "stop", body, project, env).out)["reason"]
    hook(
        "copilot",
        "user-prompt-submit",
        payload("copilot", "h1", project, prompt=prompt(reason)),
        project,
        env,
    )
    assert audit(key, project, env)[-1] == "prompt"
    assert sessions(project, env)[0]["blocks"] == 0


def test_the_block_text_does_not_end_a_yield(project: Path, env: dict[str, str]) -> None:
    # after the blocks were cleared, an old block's text is a user prompt like any other
    key = held("copilot", project, env)
    body = payload("copilot", "h1", project, stop_hook_active=False)
    reason = json.loads(hook("copilot", "stop", body, project, env).out)["reason"]
    assert smllm(["fire", "--session", key, "yield"], project, env).code == 0
    hook(
        "copilot",
        "user-prompt-submit",
        payload("copilot", "h1", project, prompt=reason),
        project,
        env,
    )
    [s] = sessions(project, env)
    assert (s["yielded"], audit(key, project, env)[-1]) == (False, "prompt")


# -- Copilot running Claude's hooks --------------------------------------------------------------


def test_claude_hooks_run_by_copilot_write_nothing(project: Path, env: dict[str, str]) -> None:
    state = Path(env["XDG_STATE_HOME"])
    stamp = {"timestamp": "2026-12-02T14:14:23.637Z"}
    for which in ("session-start", "user-prompt-submit", "stop"):
        ran = hook("claude", which, payload("claude", "h1", project, **stamp), project, env)
        assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    assert not state.exists()

    key = held("claude", project, env)
    body = payload("claude", "h1", project, stop_hook_active=False)
    assert "decision" in json.loads(hook("claude", "stop", body, project, env).out)
    before = sessions(project, env)
    for which in ("session-start", "user-prompt-submit", "stop"):
        extra = {**stamp, "prompt": "x", "stop_hook_active": True}
        ran = hook("claude", which, payload("claude", "h1", project, **extra), project, env)
        assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    assert sessions(project, env) == before
    assert audit(key, project, env) == ["bind", "event", "block"]
    # the same payload without the timestamp is Claude's own: it counts
    ran = hook(
        "claude", "stop", payload("claude", "h1", project, stop_hook_active=True), project, env
    )
    assert ran.err == block_text(key) + "\n"


# -- quiet outside smllm -------------------------------------------------------------------------


@pytest.mark.parametrize("name", HARNESSES)
def test_quiet_outside_smllm(name: str, tmp_path: Path, env: dict[str, str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for which in ("session-start", "user-prompt-submit", "stop"):
        body = payload(name, "h1", plain, prompt="hi", stop_hook_active=False)
        ran = hook(name, which, body, plain, env)
        assert (ran.code, ran.out, ran.err) == (0, "{}\n", ""), which
    assert not Path(env["XDG_STATE_HOME"]).exists()


def test_no_session_id_is_quiet(project: Path, env: dict[str, str]) -> None:
    for body in (
        {},
        {"cwd": str(project)},
        {"sessionId": "h1"},
        {"session_id": 7},
        {"session_id": ""},
        {"session_id": "x" * 5000},
    ):
        ran = hook("claude", "session-start", body, project, env)
        assert (ran.code, ran.out, ran.err) == (0, "{}\n", ""), body
    assert not Path(env["XDG_STATE_HOME"]).exists()


# -- long session-start texts --------------------------------------------------------------------


def test_a_long_text_is_cut_in_its_instructions(project: Path, env: dict[str, str]) -> None:
    machine = project / ".smllm" / "dev.smllm.yaml"
    long = "".join(f"Step {i}: read the rules of part {i} and follow them.\\n" for i in range(400))
    text = machine.read_text()
    machine.write_text(
        text.replace("Write a plan for the issue in PLAN.md, then fire planned.", long)
    )
    key = held("claude", project, env)
    ran = hook("claude", "session-start", payload("claude", "h1", project), project, env)
    got = context("claude", ran.out)
    assert len(got) <= START_LIMIT
    note = cut_note(key)
    assert note == (
        "[The instructions are cut here to keep this message short. To read them in full, "
        f'call the smllm tool with {{ session: "{key}" }} or run smllm session show {key}.]'
    )
    head = f"<smllm>\nsession {key} · dev › PLAN · issue GH-1\n<instructions>\nStep 0: read"
    assert got.startswith(head)
    kept = got[len(head) - len("Step 0: read") : got.index("\n\n" + note)]
    full = smllm(["session", "show", key], project, env).out
    assert kept in full and kept.endswith("and follow them.")  # cut at a line's end
    assert len(kept) > START_LIMIT - 1500  # what room there is, is used
    tail = f"{note}\n</instructions>\n" + block_text(key).split("\n", 2)[2]
    assert got.endswith(tail)
    # the text the tool gives is whole
    assert "Step 399" in full and "Step 399" not in got


def test_a_short_text_is_not_cut(store_project: Path, env: dict[str, str]) -> None:
    project = store_project  # on each backend (conftest.store_project)
    key = held("claude", project, env)
    ran = hook("claude", "session-start", payload("claude", "h1", project), project, env)
    assert context("claude", ran.out) == smllm(["session", "show", key], project, env).out[:-1]


# -- failures ------------------------------------------------------------------------------------


def test_unknown_names(project: Path, env: dict[str, str]) -> None:
    ran = hook("cursor", "stop", {}, project, env)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == "error: no harness named cursor (claude, codex, copilot, opencode)\n"
    ran = hook("claude", "pre-tool-use", {}, project, env)
    assert (ran.code, ran.out) == (1, "")
    assert (
        ran.err == "error: no hook named pre-tool-use (session-start, user-prompt-submit, stop)\n"
    )


def test_an_unwritable_store_fails_open(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    blocked = tmp_path / "state-is-a-file"
    blocked.write_text("")
    bad = {**env, "XDG_STATE_HOME": str(blocked)}
    ran = hook("claude", "session-start", payload("claude", "h1", project), project, bad)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err.startswith("error: can't create ") and "Traceback" not in ran.err


def test_a_broken_store_fails_open(project: Path, env: dict[str, str]) -> None:
    held("claude", project, env)
    store = Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    for extra in ("-wal", "-shm"):
        Path(str(store) + extra).unlink(missing_ok=True)
    store.write_bytes(b"this is not a database" * 100)
    for which in ("session-start", "user-prompt-submit", "stop"):
        ran = hook("claude", which, payload("claude", "h1", project), project, env)
        assert (ran.code, ran.out) == (1, ""), which
        assert ran.err.startswith("error: ") and "Traceback" not in ran.err
        debug = hook(
            "claude", which, payload("claude", "h1", project), project, {**env, "SMLLM_DEBUG": "1"}
        )
        assert (debug.code, debug.out) == (1, "")
        assert "Traceback" in debug.err


def test_a_nul_in_cwd_is_a_failure(project: Path, env: dict[str, str]) -> None:
    ran = hook("claude", "session-start", {"session_id": "h1", "cwd": "/tmp\u0000x"}, project, env)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err.startswith("error: the hook input's cwd is not a path")


def test_a_closed_stdout_is_quiet(project: Path, env: dict[str, str]) -> None:
    held("claude", project, env)
    body = json.dumps(payload("claude", "h1", project, stop_hook_active=False)).encode()
    proc = stop_process(project, env, text=False)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(body, timeout=60)
    assert (proc.returncode, err) == (0, b"")


@pytest.mark.parametrize(
    ("values", "folder"),
    [
        ({"XDG_STATE_HOME": "/x/state"}, "/x/state/smllm"),
        ({"XDG_STATE_HOME": ""}, "/home/someone/.local/state/smllm"),
        ({}, "/home/someone/.local/state/smllm"),
    ],
    ids=["set", "empty", "unset"],
)
def test_the_user_store_lives_in_the_state_home(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, str], folder: str
) -> None:
    # the hooks and the API open it through this one function (smllm.store.user)
    from smllm.api.stores import user_store

    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    assert user_store().path == f"{folder}/user.db"
