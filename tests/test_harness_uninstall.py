"""`smllm harness uninstall NAME` and the install's smaller outputs (issue 20 §8): uninstall
removes smllm's entries and leaves the user's, keeps a part another installed client shares
(`.mcp.json`'s server, the AGENTS.md region); a second install that writes nothing says so in
one line; `status` without NAME doesn't list Copilot as half-installed after installing only
Claude (they share `.mcp.json`); `--help` names the parts; every option has help text."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conftest import smllm

from smllm.cli.parser import build

MINE = {"mcpServers": {"mine": {"command": "x"}}, "other": [1, 2]}
SETTINGS = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine stop"}]}]}}


def test_uninstall_keeps_the_users_entries_and_shared_parts(
    project: Path, env: dict[str, str]
) -> None:
    (project / ".mcp.json").write_text(json.dumps(MINE))
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(SETTINGS))
    (project / "AGENTS.md").write_text("# My notes\n")
    for name in ("claude", "copilot"):
        assert smllm(["harness", "install", name], project, env).code == 0
    ran = smllm(["harness", "uninstall", "claude"], project, env)
    assert ran.code == 0, ran.err
    assert ran.out == (
        "instructions: kept (used by copilot) (AGENTS.md)\n"
        "mcp: kept (used by copilot) (.mcp.json)\n"
        "hooks: removed (.claude/settings.json)\n"
        "permissions: removed (.claude/settings.json)\n"
        "statusline: removed (.claude/skills/smllm-statusline/SKILL.md)\n"
    )
    assert json.loads((project / ".claude" / "settings.json").read_text()) == SETTINGS
    assert "smllm" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
    gone = smllm(["harness", "uninstall", "copilot", "--json"], project, env)
    report = json.loads(gone.out)
    assert [(p["part"], p["action"]) for p in report["parts"]] == [
        ("instructions", "removed"),
        ("mcp", "removed"),
        ("hooks", "removed"),
    ]
    assert json.loads((project / ".mcp.json").read_text()) == MINE
    assert (project / "AGENTS.md").read_text() == "# My notes\n"
    assert not (project / ".github").exists()
    again = smllm(["harness", "uninstall", "copilot"], project, env)
    assert again.out == "copilot: nothing to do; smllm is uninstalled as it should be\n"
    assert smllm(["harness", "status", "--json"], project, env).out == (
        '{"scope":"project","harnesses":[]}\n'
    )


def test_a_second_install_says_so_in_one_line(project: Path, env: dict[str, str]) -> None:
    assert smllm(["harness", "install", "codex"], project, env).code == 0
    again = smllm(["harness", "install", "codex"], project, env)
    assert again.code == 0
    assert again.out == "codex: nothing to do; smllm is installed as it should be\n"
    assert "note: Codex runs hooks only once you trust them" in again.err


def test_status_lists_what_was_installed(project: Path, env: dict[str, str]) -> None:
    assert smllm(["harness", "install", "claude"], project, env).code == 0
    listed = json.loads(smllm(["harness", "status", "--json"], project, env).out)
    assert [h["harness"] for h in listed["harnesses"]] == ["claude"]
    assert smllm(["harness", "install", "copilot"], project, env).code == 0
    listed = json.loads(smllm(["harness", "status", "--json"], project, env).out)
    assert [h["harness"] for h in listed["harnesses"]] == ["claude", "copilot", "agents"]


def test_help_names_the_parts(project: Path, env: dict[str, str]) -> None:
    for action in ("install", "status", "uninstall"):
        shown = smllm(["harness", action, "--help"], project, env)
        assert shown.code == 0
        text = " ".join(shown.out.split())
        assert "Parts: claude: instructions, mcp, hooks, permissions, statusline; codex:" in text
        assert "opencode: instructions, mcp, plugin; agents: instructions." in text


def test_every_option_has_help_text() -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            elif action.help is None:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build(), "smllm")
    assert missing == []


def test_odd_groups_of_the_users_hooks_are_kept(project: Path, env: dict[str, str]) -> None:
    """Hook groups smllm can't read as a handler list (none, or not a list) are the user's:
    install and uninstall leave them where they are, whatever they hold."""
    odd = {
        "hooks": {
            "Stop": [
                {"matcher": "odd"},
                {"hooks": [{"type": "command", "command": "mine stop"}]},
                {"hooks": "not a list"},
            ],
            "SessionStart": ["a string group"],
        }
    }
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(odd))
    assert smllm(["harness", "install", "claude"], project, env).code == 0
    installed = json.loads(settings.read_text())["hooks"]
    assert installed["Stop"][:3] == odd["hooks"]["Stop"]
    assert installed["SessionStart"][:1] == odd["hooks"]["SessionStart"]
    ran = smllm(["harness", "uninstall", "claude"], project, env)
    assert ran.code == 0, ran.err
    assert json.loads(settings.read_text()) == odd
