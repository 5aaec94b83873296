"""The notes after install and status: restart and trust steps per client, the client versions
these files were tested with, and Claude's status line (cli-and-harnesses.md §6, §6a)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys

from .jsonfile import Broken, parse_json, runs_smllm
from .parts import Where
from .plan import Row
from .writing import read_text

__all__ = ["TESTED_WITH", "notes_for", "path_notes", "this_smllm"]

#: the client versions the written files were tested with (real-clients.md, 2026-12-03)
TESTED_WITH = {
    "claude": "Claude Code 2.1.328",
    "codex": "Codex 0.169.0",
    "copilot": "GitHub Copilot CLI 1.0.102",
    "opencode": "OpenCode 1.18.33",
}


def _has_statusline(where: Where) -> bool:
    """Whether a Claude settings file of this scope (the user's, for a project too) has a
    `statusLine` running `smllm statusline`."""
    user = os.path.join(where.home, ".claude")
    folders = [user] if where.scope == "user" else [os.path.join(where.root, ".claude"), user]
    for folder in folders:
        for name in ("settings.json", "settings.local.json"):
            with contextlib.suppress(Broken):
                line = parse_json(read_text(os.path.join(folder, name))).get("statusLine")
                if isinstance(line, dict) and runs_smllm(line.get("command"), "statusline"):
                    return True
    return False


def _codex_trusts(where: Where) -> bool:
    """Whether Codex's config marks the project trusted (`[projects."ROOT"] trust_level`)."""
    import tomllib

    home = where.env.get("CODEX_HOME") or os.path.join(where.home, ".codex")
    with contextlib.suppress(Broken, tomllib.TOMLDecodeError, AttributeError):
        # a BOM is allowed in a TOML file (smllm's own reader takes it), not by tomllib
        text = read_text(os.path.join(home, "config.toml")) or ""
        data = tomllib.loads(text.removeprefix("\ufeff"))
        projects = data.get("projects", {})
        return any(
            projects.get(root, {}).get("trust_level") == "trusted"
            for root in (where.root, os.path.realpath(where.root))
        )
    return False


def _claude_trusts(where: Where) -> bool:
    """Whether ~/.claude.json says the project's trust dialog was accepted."""
    with contextlib.suppress(Broken, AttributeError):
        data = parse_json(read_text(os.path.join(where.home, ".claude.json")))
        projects = data.get("projects", {})
        return any(
            projects.get(root, {}).get("hasTrustDialogAccepted") is True
            for root in (where.root, os.path.realpath(where.root))
        )
    return False


def this_smllm() -> str | None:
    """The absolute path of this smllm's console script: the one beside the running Python
    (a virtual environment's bin folder), else `smllm` on PATH; None when neither is there."""
    folder = os.path.dirname(os.path.abspath(sys.executable))
    for name in ("smllm", "smllm.exe"):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("smllm")
    return os.path.abspath(found) if found else None


def path_notes(where: Where) -> list[str]:
    """A project's files run `smllm` from the client's PATH: whether this PATH finds it, and
    finds this smllm (a client started from this shell has this PATH)."""
    if where.scope != "project":
        return []
    found = shutil.which("smllm", path=where.env.get("PATH", os.defpath))
    here = this_smllm()
    fix = (
        "start the client where smllm is on PATH (a virtual environment activated), or install "
        "smllm for your user (pipx install smllm); --scope user writes this smllm's full path "
        "in your user files instead"
    )
    if found is None:
        where_it_is = f" (this one is {here})" if here else ""
        return [
            f"smllm is not on PATH here{where_it_is}: the project's files run smllm from the "
            f"client's PATH, so its hooks and MCP server won't start; {fix}"
        ]
    found = os.path.abspath(found)
    if here is not None and os.path.realpath(found) != os.path.realpath(here):
        return [
            f"the smllm on PATH is {found}, not this one ({here}): the clients will run that one"
        ]
    if sys.prefix != sys.base_prefix and os.path.dirname(found) == os.path.dirname(
        os.path.abspath(sys.executable)
    ):
        return [
            f"smllm is on PATH from the virtual environment {sys.prefix}: start the clients "
            "where it is active, or install smllm with pipx for every shell"
        ]
    return []


def notes_for(harness: str, where: Where, rows: list[Row]) -> list[str]:
    """The notes for `harness` once its rows are known: none when no part is installed."""
    live = {row.part for row in rows if row.state not in ("missing", "declined")}
    live |= {row.part for row in rows if row.action == "written"}
    live -= {row.part for row in rows if row.action in ("removed", "declined")}
    if not live:
        return []
    notes = []
    project = where.scope == "project"
    if harness == "claude":
        if project and "mcp" in live:
            notes.append(
                "Claude Code asks once to approve the project's MCP server smllm (.mcp.json): "
                "approve it"
            )
        if project and "permissions" in live and not _claude_trusts(where):
            notes.append(
                "Claude Code ignores the permission in .claude/settings.json until you trust "
                "this folder: start claude here and accept the trust dialog"
            )
        notes.append("restart Claude Code to load smllm's hooks and MCP server")
        if "statusline" in live and not _has_statusline(where):
            notes.append(
                "no statusLine runs smllm statusline; ask Claude to use the smllm-statusline "
                "skill to show smllm's state there"
            )
    elif harness == "codex":
        if "hooks" in live:
            notes.append(
                "Codex runs hooks only once you trust them: open /hooks in Codex and trust "
                "smllm's three hooks (untrusted ones are skipped silently)"
            )
        if project and not _codex_trusts(where):
            notes.append(
                "Codex reads .codex/ only in a trusted project: start codex here and trust "
                "the folder (or run codex exec --trust)"
            )
    elif harness == "copilot":
        if project:
            notes.append(
                "Copilot CLI reads .github/hooks/ and .mcp.json only in a trusted folder: start "
                "copilot here and trust the folder"
            )
        notes.append("restart Copilot CLI to load smllm's hooks and MCP server")
    elif harness == "opencode":
        notes.append("restart OpenCode to load smllm's plugin and MCP server")
    else:
        notes.append("agents run smllm fire in a shell: smllm must be on their PATH")
    if harness in TESTED_WITH:
        notes.append(f"tested with {TESTED_WITH[harness]}; older versions may not run it all")
    return path_notes(where) + notes
