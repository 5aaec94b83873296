"""Claude Code's user-scope MCP server, which smllm never writes itself: `claude mcp remove
--scope user smllm`, then `claude mcp add-json --scope user smllm JSON`, each an argument list
(no shell); the state is read back from `~/.claude.json` (cli-and-harnesses.md §6)."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from ...jsontext import dumps
from .jsonfile import entry_state, parse_json
from .writing import read_text

__all__ = ["ClaudeFailed", "claude_json", "run_claude", "user_mcp_state"]

#: how long one `claude mcp …` may take: it starts Node and edits one file
CLAUDE_TIMEOUT_S = 120


class ClaudeFailed(Exception):
    """`claude` is missing or an invocation failed; the message says which and why."""


def claude_json(home: str) -> str:
    return os.path.join(home, ".claude.json")


def user_mcp_state(path: str, want: dict[str, Any]) -> str:
    """`mcpServers.smllm` of ~/.claude.json (`path`) against `want`; Broken when the file isn't
    JSON."""
    return entry_state(parse_json(read_text(path)), ("mcpServers",), "smllm", want)


def run_claude(state: str, want: dict[str, Any] | None) -> list[list[str]]:
    """Bring the user-scope server to `want` (None: remove it), given its `state`; returns the
    argument lists run. Raises ClaudeFailed."""
    exe = shutil.which("claude")
    if exe is None:
        raise ClaudeFailed("claude is not on PATH; Claude's user-scope MCP server is added with it")
    runs = []
    if state != "missing":
        runs.append([exe, "mcp", "remove", "--scope", "user", "smllm"])
    if want is not None:
        entry = dumps(want)
        runs.append([exe, "mcp", "add-json", "--scope", "user", "smllm", entry])
    for argv in runs:
        shown = " ".join(["claude", *argv[1:6]])
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CLAUDE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClaudeFailed(f"{shown} failed: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            why = f": {said[-1]}" if said else ""
            raise ClaudeFailed(f"{shown} failed (exit {done.returncode}){why}")
    return [["claude", *argv[1:]] for argv in runs]
