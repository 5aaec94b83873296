"""The OpenCode plugin (src/smllm/harness/assets/opencode-plugin.js) under node, with a fake
OpenCode (its `client`, its events and hooks) and a fake or the real smllm.

Each scenario is a list of steps that a node driver plays against the plugin: bus events,
`chat.message`, `experimental.chat.system.transform`; it records what the plugin asks of the
client and what the transform made of the system messages. The fake smllm logs each hook call
(argv and stdin) and answers what the test says.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.opencode_plugin import (
    ASSET,
    BLOCK,
    OPENCODE,
    START,
    TITLE,
    TOKEN,
    Played,
    chat,
    created,
    idle,
    play,
    start_answer,
    status,
    system,
    tool,
)

# -- the module ----------------------------------------------------------------------------------


def test_the_module_shape_and_the_load_log(tmp_path: Path) -> None:
    played = play(tmp_path, [])
    assert played.result["exports"] == ["default"]  # every named export must be a function
    assert (played.result["id"], played.result["serverType"]) == ("smllm", "function")
    hooks = ["chat.message", "event", "experimental.chat.system.transform", "tool.execute.after"]
    assert played.result["hooks"] == hooks
    bin_path = str(tmp_path / "smllm-fake")
    assert played.stderr == f"smllm: OpenCode plugin loaded ({bin_path})\n"
    text = (tmp_path / "smllm.js").read_text()
    assert TOKEN not in text and json.dumps(bin_path) in text
    assert "import " not in text.replace('import { spawn } from "node:child_process"', "")


def test_the_asset_without_the_path_runs_smllm_from_path() -> None:
    text = ASSET.read_text()
    assert f'typeof {TOKEN} === "string" ? {TOKEN} : "smllm"' in text


# -- session start and the system messages -------------------------------------------------------


def test_session_start_text_joins_the_first_system_message(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            system("s1", TITLE, "title extra"),
            system("s1", OPENCODE, "environment"),
            system("s1", OPENCODE),
            system("s1"),
        ],
        {"session-start.out": START},
    )
    assert played.hooks == [("session-start", {"session_id": "s1", "cwd": "/the/project"})]
    assert played.log[0]["argv"] == ["harness", "hook", "opencode", "session-start"]
    ctx = "<smllm>\nCTX\n</smllm>"
    assert played.result["systems"] == [
        [TITLE, "title extra"],  # the title request gets nothing
        [f"{OPENCODE}\n\n{ctx}", "environment"],  # never a second system message
        [f"{OPENCODE}\n\n{ctx}"],  # every request: OpenCode doesn't keep it
        [ctx],
    ]


def test_a_quiet_start_adds_nothing(tmp_path: Path) -> None:
    played = play(tmp_path, [created("s1"), system("s1", OPENCODE)], {"session-start.out": "{}\n"})
    assert played.result["systems"] == [[OPENCODE]]


def test_a_session_from_before_the_plugin_binds_at_its_first_message(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [chat("old", "hello"), system("old", OPENCODE)],
        {"session-start.out": START},
    )
    assert [h for h, _ in played.hooks] == ["session-start", "user-prompt-submit"]
    assert played.result["systems"] == [[f"{OPENCODE}\n\n<smllm>\nCTX\n</smllm>"]]


def test_subagent_sessions_are_left_alone(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("child", parent="s1"),
            system("child", OPENCODE),
            chat("child", "do the subtask"),
            tool("child", "smllm_smllm"),
            status("child", "busy"),
            *idle("child"),
        ],
        {"session-start.out": START, "stop.out": BLOCK},
    )
    assert played.hooks == []
    assert played.result["systems"] == [[OPENCODE]]
    assert played.prompts == []


# -- the view after a tool call, a user message, a re-prompt --------------------------------------


def views(*texts: str) -> dict[str, str]:
    """The fake's session-start answers: the Nth call shows TEXTS[N-1]."""
    return {f"session-start.out.{n}": start_answer(t) for n, t in enumerate(texts, start=1)}


def firsts(played: Played) -> list[str]:
    """The first system message of each transformed request, OpenCode's own text cut off."""
    return [s[0].removeprefix(f"{OPENCODE}\n\n") for s in played.result["systems"]]


def test_an_smllm_tool_call_refreshes_the_system_text(tmp_path: Path) -> None:
    request = system("s1", OPENCODE)
    steps = [created("s1"), request, tool("s1", "smllm_smllm", session="sm-a"), request]
    steps += [tool("s1", "read", filePath="PLAN.md"), tool("s1", "bash", command="ls -l"), request]
    steps += [tool("s1", "bash", command="cd /p && smllm fire --session sm-a planned"), request]
    steps += [tool("s1", "bash", command="/venv/bin/smllm session show sm-a"), request]
    played = play(tmp_path, steps, views("V1", "V2", "V3", "V4"))  # read, ls: not smllm's
    start = ("session-start", {"session_id": "s1", "cwd": "/the/project"})
    assert played.hooks == [start, start, start, start]
    assert firsts(played) == ["V1", "V2", "V2", "V3", "V4"]


def test_the_next_request_waits_for_the_view_after_the_tool_call(tmp_path: Path) -> None:
    # the plugin's tool hook returns at once (nowait: the driver doesn't wait either); the next
    # transform, asked for while the slow session-start still runs, waits for its answer
    steps = [created("s1"), system("s1", OPENCODE), {**tool("s1", "smllm_smllm"), "nowait": True}]
    steps += [{"op": "sleep", "ms": 50}, system("s1", OPENCODE)]
    played = play(tmp_path, steps, {**views("V1", "V2"), "session-start.sleep.2": "0.7"})
    assert firsts(played) == ["V1", "V2"]


def test_a_failed_refresh_keeps_the_text_it_had(tmp_path: Path) -> None:
    steps = [created("s1"), tool("s1", "smllm_smllm"), system("s1", OPENCODE)]
    busy = "error: session sm-a is busy with another call\n"
    answers = {**views("V1", "", "V3"), "session-start.code.2": "1", "session-start.err.2": busy}
    played = play(tmp_path, [*steps, *steps[1:]], answers)
    assert firsts(played) == ["V1", "V3"]
    assert f"smllm: the session-start hook failed: {busy}" in played.stderr


def test_a_user_message_and_a_re_prompt_refresh_the_system_text(tmp_path: Path) -> None:
    steps = [
        created("s1"),
        system("s1", OPENCODE),
        chat("s1", "work on GH-1"),
        status("s1", "busy"),
    ]
    # blocked: the re-prompt goes out with the view as the stop left it
    steps += [system("s1", OPENCODE), *idle("s1"), chat("s1", "<last prompt>")]
    answers = {**views("V1", "V2", "V3"), "stop.out": BLOCK}
    played = play(tmp_path, [*steps, system("s1", OPENCODE)], answers)
    hooks = ["session-start", "user-prompt-submit", "session-start", "stop", "session-start"]
    assert [h for h, _ in played.hooks] == hooks
    assert firsts(played) == ["V1", "V2", "V3"]
    assert len(played.prompts) == 1


# -- prompts -------------------------------------------------------------------------------------


def test_a_user_message_runs_the_prompt_hook(tmp_path: Path) -> None:
    played = play(tmp_path, [created("s1"), chat("s1", "fix issue GH-7")])
    assert played.hooks[1] == (
        "user-prompt-submit",
        {"session_id": "s1", "cwd": "/the/project", "prompt": "fix issue GH-7"},
    )


# -- stops ---------------------------------------------------------------------------------------


def test_a_block_is_sent_back_and_the_next_idle_is_continuing(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            chat("s1", "work"),
            status("s1", "busy"),
            *idle("s1"),  # two idle events for one turn: one stop
            chat("s1", "<last prompt>"),  # OpenCode runs chat.message for the re-prompt too
            status("s1", "busy"),
            *idle("s1"),
        ],
        {"stop.out": BLOCK},
    )
    stops = [body for hook, body in played.hooks if hook == "stop"]
    assert stops == [
        {"session_id": "s1", "cwd": "/the/project", "stop_hook_active": False},
        {"session_id": "s1", "cwd": "/the/project", "stop_hook_active": True},
    ]
    # the re-prompt is not a user prompt
    assert [h for h, _ in played.hooks].count("user-prompt-submit") == 1
    first = {
        "how": "promptAsync",
        "path": {"id": "s1"},
        "body": {"parts": [{"type": "text", "text": "<smllm>\nBLOCK\n</smllm>"}]},
    }
    assert played.prompts == [first, first]  # the fake smllm blocks every time


def test_a_user_message_between_ends_the_continuation(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            status("s1", "busy"),
            *idle("s1"),
            chat("s1", "<last prompt>"),
            chat("s1", "actually, do something else"),
            status("s1", "busy"),
            *idle("s1"),
        ],
        {"stop.out": BLOCK},
    )
    stops = [body["stop_hook_active"] for hook, body in played.hooks if hook == "stop"]
    assert stops == [False, False]


def test_no_stop_after_an_abort_or_an_error(tmp_path: Path) -> None:
    error = {
        "type": "session.error",
        "properties": {"sessionID": "s1", "error": {"name": "MessageAbortedError"}},
    }
    failed = {
        "type": "message.updated",
        "properties": {
            "sessionID": "s1",
            "info": {"role": "assistant", "sessionID": "s1", "error": {"name": "APIError"}},
        },
    }
    played = play(
        tmp_path,
        [
            created("s1"),
            status("s1", "busy"),
            {"op": "event", "event": error},
            *idle("s1"),
            chat("s1", "go on"),
            {"op": "event", "event": failed},
            *idle("s1"),
            chat("s1", "and again"),
            *idle("s1"),  # a turn that ends well stops as usual
        ],
        {"stop.out": BLOCK},
    )
    assert [h for h, _ in played.hooks].count("stop") == 1
    assert len(played.prompts) == 1


def test_an_idle_without_a_turn_runs_no_stop(tmp_path: Path) -> None:
    played = play(tmp_path, [created("s1"), *idle("s1"), *idle("s1")], {"stop.out": BLOCK})
    assert [h for h, _ in played.hooks] == ["session-start"]


def test_no_re_prompt_once_a_new_turn_began(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            status("s1", "busy"),
            {**idle("s1")[0], "nowait": True},  # the stop hook takes half a second …
            {"op": "sleep", "ms": 150},
            chat("s1", "the user types meanwhile"),  # … and the user starts a turn
        ],
        {"stop.out": BLOCK, "stop.sleep": "0.5"},
    )
    assert [h for h, _ in played.hooks].count("stop") == 1
    assert played.prompts == []


def test_prompt_stands_in_for_prompt_async(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [{"op": "no-prompt-async"}, created("s1"), status("s1", "busy"), *idle("s1")],
        {"stop.out": BLOCK},
    )
    assert [p["how"] for p in played.prompts] == ["prompt"]


@pytest.mark.parametrize(
    "answers",
    [
        {"stop.code": "1", "stop.out": "", "stop.err": "error: the store is busy\n"},
        {"stop.out": "not json"},
        {"stop.out": '{"decision":"block"}'},
    ],
    ids=["failed", "not-json", "no-reason"],
)
def test_a_failing_hook_blocks_nothing(tmp_path: Path, answers: dict[str, str]) -> None:
    played = play(
        tmp_path,
        [created("s1"), status("s1", "busy"), *idle("s1"), status("s1", "busy"), *idle("s1")],
        answers,
    )
    assert played.prompts == []
    if "stop.code" in answers:  # said once, however often it fails
        assert played.stderr.count("smllm: the stop hook failed: error: the store is busy") == 1


def test_a_missing_smllm_is_said_once(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [created("s1"), system("s1", OPENCODE), chat("s1", "a"), chat("s1", "b")],
        bin_path=str(tmp_path / "no-such-smllm"),
    )
    assert played.result["systems"] == [[OPENCODE]]
    assert played.stderr.count("smllm: the user-prompt-submit hook failed") == 1
    assert played.stderr.count("smllm: the session-start hook failed") == 1


# -- with the real smllm -------------------------------------------------------------------------


def real_smllm(tmp_path: Path, issue: str) -> tuple[Path, list[str]]:
    """This tree's smllm as an executable for the plugin, and the step's argv that enters the
    example machine for ISSUE in the session the plugin's text names ({KEY})."""
    wrapper = tmp_path / "smllm"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m smllm "$@"\n')
    wrapper.chmod(0o755)
    enter = [
        sys.executable, "-m", "smllm", "fire", "--session", "{KEY}", "enter",
        "--param", "stateMachine=dev", "--param", f"issueId={issue}",
    ]  # fmt: skip
    return wrapper, enter


def test_with_the_real_smllm(tmp_path: Path, project: Path, env: dict[str, str]) -> None:
    wrapper, enter = real_smllm(tmp_path, "GH-3")
    steps = [
        created("ses_1"),
        system("ses_1", TITLE),
        system("ses_1", OPENCODE),
        chat("ses_1", "work on GH-3"),
        {"op": "exec", "argv": enter},
        status("ses_1", "busy"),
        *idle("ses_1"),
        chat("ses_1", "<last prompt>"),
        status("ses_1", "busy"),
        *idle("ses_1"),
    ]
    driver_env = {**env, "PLUGIN_DIRECTORY": str(project)}
    played = play(tmp_path, steps, bin_path=str(wrapper), env=driver_env)
    result = played.result
    title, first = result["systems"]
    assert title == [TITLE]
    [start] = first
    assert start.startswith(OPENCODE + "\n\n<smllm>\nsession sm-")
    key = re.search(r"session (sm-[a-z0-9]+) · idle", start)
    assert key is not None
    reason = result["prompts"][0]["body"]["parts"][0]["text"]
    assert reason.startswith(f"<smllm>\nsession {key[1]} · dev › PLAN · issue GH-3\n")
    assert "<instructions>" not in reason
    assert len(result["prompts"]) == 1  # the second stop was the runaway: let through
    shown = subprocess.run(
        [sys.executable, "-m", "smllm", "session", "show", key[1], "--audit"],
        capture_output=True, text=True, env=env, cwd=project, timeout=60,
    )  # fmt: skip
    kinds = [line.split("  ")[1] for line in shown.stdout.splitlines()]
    assert kinds == ["bind", "event", "block", "runaway"]


def test_the_system_text_follows_the_session(
    tmp_path: Path, project: Path, env: dict[str, str]
) -> None:
    """OpenCode sends the system messages again with every request: after an smllm tool call
    (or a user message) the plugin's text is the session's view by then, not the idle list it
    got at session.created. The exec enters the machine as the MCP tool would."""
    wrapper, enter = real_smllm(tmp_path, "GH-4")
    steps = [
        created("ses_2"),
        system("ses_2", OPENCODE),
        {"op": "exec", "argv": enter},
        system("ses_2", OPENCODE),  # a shell the plugin didn't see: the text it had
        tool("ses_2", "smllm_smllm", session="{KEY}", event="enter"),
        system("ses_2", OPENCODE),  # the view after the tool call
        chat("ses_2", "go on"),
        system("ses_2", OPENCODE),  # the next turn: the view, asked for again
    ]
    played = play(
        tmp_path, steps, bin_path=str(wrapper), env={**env, "PLUGIN_DIRECTORY": str(project)}
    )
    first, same, after, turn = firsts(played)
    key = re.search(r"^<smllm>\nsession (sm-[a-z0-9]+) · idle\n", first)
    assert key is not None and same == first
    shown = subprocess.run(
        [sys.executable, "-m", "smllm", "session", "show", key[1]],
        capture_output=True, text=True, env=env, cwd=project, timeout=60,
    )  # fmt: skip
    view = shown.stdout.rstrip("\n")
    assert view.startswith(f"<smllm>\nsession {key[1]} · dev › PLAN · issue GH-4\n<instructions>")
    assert after == turn == view
