"""OpenCode reports a session idle while the subagents it started still run (issue 20 §3): the
plugin's stop for that session waits until its last subagent is idle, so the agent isn't
re-prompted in the middle of its own work; a subagent of another session doesn't hold it."""

from __future__ import annotations

from pathlib import Path

from helpers.opencode_plugin import BLOCK, Played, chat, created, idle, play, status


def stops(played: Played) -> list[str]:
    return [body["session_id"] for hook, body in played.hooks if hook == "stop"]


def test_the_stop_waits_for_the_last_subagent(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            chat("s1", "work"),
            status("s1", "busy"),
            created("c1", parent="s1"),
            created("c2", parent="s1"),
            status("c1", "busy"),
            status("c2", "busy"),
            *idle("s1"),  # the parent idles while both subagents run: no stop yet
            *idle("c1"),  # one still runs
            *idle("c2"),  # the last one: now the parent's stop runs, once
        ],
        {"stop.out": BLOCK},
    )
    assert stops(played) == ["s1"]
    assert len(played.prompts) == 1


def test_a_stop_without_running_subagents_is_at_once(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            created("s2"),
            chat("s1", "work"),
            status("s1", "busy"),
            created("c1", parent="s2"),  # another session's subagent
            status("c1", "busy"),
            created("c0", parent="s1"),
            status("c0", "busy"),
            *idle("c0"),  # s1's subagent is done before s1 idles
            *idle("s1"),
        ],
        {"stop.out": BLOCK},
    )
    assert stops(played) == ["s1"]
    assert len(played.prompts) == 1


def test_no_stop_while_a_subagent_runs(tmp_path: Path) -> None:
    played = play(
        tmp_path,
        [
            created("s1"),
            chat("s1", "work"),
            status("s1", "busy"),
            created("c1", parent="s1"),
            status("c1", "busy"),
            *idle("s1"),
        ],
        {"stop.out": BLOCK},
    )
    assert stops(played) == []
    assert played.prompts == []
