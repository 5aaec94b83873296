"""Which parts each harness has, the file each part lives in for a scope, and what smllm writes
there (cli-and-harnesses.md §6's table). A part is data: its file, the kind of that file, and
three functions of the file's parsed content: `state`, `put` (smllm's entries in place) and
`drop` (smllm's entries out). Nothing here reads or writes a file.

A project-scope file runs plain `smllm`, found on the client's PATH, so that the files a team
commits are the same bytes on every machine; a user-scope file runs the absolute path of this
smllm's console script (a virtual environment's `smllm` need not be on the client's PATH). A
command is a path plus arguments (no shell operators, cli-and-harnesses.md §6a; PowerShell's
`&` before a quoted path); hooks get an explicit 30 s timeout and no matcher.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ...errors import SmllmError
from ...jsontext import dumps
from ...machine.configs.config import HARNESS_PARTS
from ..hook import HOOKS
from .jsonc import opencode_config_path
from .jsonfile import (
    Broken,
    drop_entry,
    drop_hooks,
    drop_value,
    dump_json,
    entry_state,
    hooks_state,
    parse_json,
    put_entry,
    put_hooks,
    put_value,
    same_but_path,
    value_state,
)
from .region import claude_target, drop_region, put_region, region_state
from .tomlfile import table_drop, table_put, table_state

__all__ = [
    "CODEX_FORWARDED",
    "HARNESSES",
    "HOOK_TIMEOUT_S",
    "PERMISSION",
    "Part",
    "Where",
    "claude_hooks",
    "mcp_entry",
    "parts_of",
    "plugin_text",
    "skill_text",
    "tool_timeout",
]

#: the harnesses in the order of the spec's table; their parts come from the config schema
HARNESSES: dict[str, tuple[str, ...]] = HARNESS_PARTS

#: every hook's explicit limit in seconds (cli-and-harnesses.md §6a: milliseconds written by
#: mistake remove the limit; Claude's default is 600 s)
HOOK_TIMEOUT_S = 30

#: Claude's permission for smllm's one MCP tool
PERMISSION = "mcp__smllm__smllm"

#: what Codex must pass to `smllm mcp` besides its fixed list (HOME, PATH, USER…), so the
#: server finds the same store, configs and cache as the hooks, which get Codex's environment
CODEX_FORWARDED = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "SMLLM_CONFIG")

#: the OpenCode plugin's stand-in for the smllm path, replaced by a JSON string literal
PLUGIN_TOKEN = "__SMLLM__"

_CLAUDE_EVENTS = dict(zip(("SessionStart", "UserPromptSubmit", "Stop"), HOOKS, strict=True))
_COPILOT_EVENTS = dict(
    zip(("sessionStart", "userPromptSubmitted", "agentStop"), HOOKS, strict=True)
)


class Where(NamedTuple):
    """What a part's path and content depend on."""

    scope: str  # "project" or "user"
    root: str  # the project root (project scope)
    home: str
    smllm: str  # how the files run smllm: `smllm` (project scope) or its absolute path
    env: Mapping[str, str]
    #: the clients' MCP tool-call limit in seconds (tool_timeout)
    tool_timeout: int = 900


class Part(NamedTuple):
    name: str
    path: str  # the file (for `external`, the file the state is read from)
    kind: str  # "text", "json", "toml", "file" (smllm's own, whole) or "external"
    state: Callable[[Any], str]
    put: Callable[[Any], Any]  # returns the new content (JSON and TOML: the same object)
    drop: Callable[[Any], Any]
    want: Any = None  # for `external`: the entry


def _command(where: Where, *args: str) -> str:
    return " ".join([shlex.quote(where.smllm), *args])


def _powershell(where: Where, *args: str) -> str:
    """The command for PowerShell, where a quoted path is only a string: `& 'PATH' ARGS`."""
    if shlex.quote(where.smllm) == where.smllm:
        return " ".join([where.smllm, *args])
    return " ".join(["&", "'" + where.smllm.replace("'", "''") + "'", *args])


def tool_timeout(longest_command_s: float) -> int:
    """The MCP tool-call limit install writes for each client, in seconds: a guard of the
    longest command the machines allow, with a minute to spare, and never under 900 s (15
    minutes: a test suite as a guard). The clients' own limits, measured (issue 20): OpenCode
    60 s, Copilot CLI 180 s, Codex 300 s, Claude Code a 30-minute idle watchdog; each reads one
    per-server setting, in a project's file too."""
    return max(900, math.ceil(longest_command_s) + 60)


def mcp_entry(where: Where) -> dict[str, Any]:
    """`mcpServers.smllm` of `.mcp.json` (Claude Code and Copilot CLI read it), Copilot's user
    file and Claude's user scope: `timeout` is both clients' tool-call limit, in ms."""
    return {
        "type": "stdio",
        "command": where.smllm,
        "args": ["mcp"],
        "timeout": where.tool_timeout * 1000,
    }


def claude_hooks(where: Where, harness: str) -> dict[str, dict[str, Any]]:
    """Claude's (and Codex's) handler per event."""
    return {
        event: {
            "type": "command",
            "command": _command(where, "harness", "hook", harness, hook),
            "timeout": HOOK_TIMEOUT_S,
        }
        for event, hook in _CLAUDE_EVENTS.items()
    }


def _copilot_hooks_text(where: Where) -> str:
    def handler(hook: str) -> dict[str, Any]:
        args = ("harness", "hook", "copilot", hook)
        return {
            "type": "command",
            "bash": _command(where, *args),
            "powershell": _powershell(where, *args),
            "timeoutSec": HOOK_TIMEOUT_S,
        }

    hooks = {event: [handler(hook)] for event, hook in _COPILOT_EVENTS.items()}
    return dump_json({"version": 1, "hooks": hooks}, None)


def skill_text(where: Where) -> str:
    """Claude's statusline part: a skill that sets `statusLine` with the user's consent."""
    command = _command(where, "statusline")
    return f"""---
name: smllm-statusline
description: Show smllm's session (state machine, state, instance) in Claude Code's status \
line. Use when the user asks for smllm in the status line or status bar.
---

# smllm in the status line

`{command}` prints one line for Claude Code's status line: the smllm machine, state and
instance of this Claude session, or `idle`. It reads the status JSON Claude Code sends on
stdin, is read-only and prints nothing outside smllm.

1. Ask the user before changing anything, and go on only with their consent: the status line
   is theirs.
2. Ask which settings file to use: `~/.claude/settings.json` (every project) or
   `.claude/settings.json` (this project only).
3. If that file has a `statusLine` already, show it to the user and replace it only if they
   say so.
4. Set `statusLine` to the object below, keeping every other key of the file as it was:

   ```json
   {{"type": "command", "command": {dumps(command)}}}
   ```

5. Tell the user the status line appears with Claude Code's next update of it.
"""


def plugin_text(where: Where) -> str:
    """The OpenCode plugin (assets/opencode-plugin.js) with this smllm's path in it."""
    from importlib.resources import files

    asset = files("smllm.harness").joinpath("assets", "opencode-plugin.js")
    try:
        text = asset.read_text(encoding="utf-8")
    except OSError as exc:
        raise SmllmError(f"smllm's OpenCode plugin is missing from its package: {exc}") from None
    return text.replace(PLUGIN_TOKEN, dumps(where.smllm))


def _then(edit: Callable[[Any], None]) -> Callable[[Any], Any]:
    """An edit in place, as a function returning the (same) edited content."""

    def run(doc: Any) -> Any:
        edit(doc)
        return doc

    return run


#: a stand-in for the path to smllm, to read another install's file as a pattern
_ANY_PATH = "SMLLMPATHSTANDIN"


def _by_another_path(text: str, content: Callable[[Where], str], where: Where) -> bool:
    """Whether `text` is what smllm writes, but with another path to smllm in it."""
    template = content(where._replace(smllm=_ANY_PATH))
    pattern = re.escape(template).replace(_ANY_PATH, "([^\n]+?)")
    found = re.fullmatch(pattern, text)
    if found is None:
        return False
    paths = {path.strip("'\"").replace("\\", "/") for path in found.groups()}
    return len(paths) == 1 and os.path.basename(paths.pop()) in ("smllm", "smllm.exe")


def _whole(
    content: Callable[[Where], str], where: Where
) -> tuple[Callable[[Any], str], Callable[[Any], Any]]:
    """state and put of a file smllm owns whole (line endings aside): `stale` when it is what
    another install wrote, with another path to smllm."""

    def state(text: str | None) -> str:
        if text is None:
            return "missing"
        text = text.replace("\r\n", "\n")
        if text == content(where):
            return "current"
        return "stale" if _by_another_path(text, content, where) else "edited"

    return state, lambda _text: content(where)


def _copilot_state(where: Where) -> Callable[[Any], str]:
    """The Copilot hooks file's state: a JSON file read as JSON (its key order and spacing
    aside), `stale` when only the path to smllm differs."""
    whole, _ = _whole(_copilot_hooks_text, where)

    def state(text: str | None) -> str:
        found = whole(text)
        if found != "edited":
            return found
        try:
            have = parse_json(text)
        except Broken:
            return "edited"
        return "stale" if same_but_path(have, parse_json(_copilot_hooks_text(where))) else found

    return state


def _part(where: Where, harness: str, name: str, path: str) -> Part:
    if name == "instructions":
        return Part(name, path, "text", region_state, put_region, drop_region)
    if name == "permissions":
        allow = ("permissions", "allow")
        return Part(
            name,
            path,
            "json",
            lambda doc: value_state(doc, allow, PERMISSION),
            _then(lambda doc: put_value(doc, allow, PERMISSION)),
            _then(lambda doc: drop_value(doc, allow, PERMISSION)),
        )
    if name == "hooks" and harness in ("claude", "codex"):
        hooks = claude_hooks(where, harness)
        return Part(
            name,
            path,
            "json",
            lambda doc: hooks_state(doc, hooks, "command"),
            _then(lambda doc: put_hooks(doc, hooks, "command")),
            _then(lambda doc: drop_hooks(doc, list(hooks), "command")),
        )
    if name in ("hooks", "statusline", "plugin"):
        content = {"hooks": _copilot_hooks_text, "statusline": skill_text, "plugin": plugin_text}
        state, put = _whole(content[name], where)
        if name == "hooks":
            state = _copilot_state(where)
        return Part(name, path, "file", state, put, lambda _text: None)
    assert name == "mcp"
    if harness == "codex":
        want: dict[str, Any] = {
            "command": where.smllm,
            "args": ["mcp"],
            "env_vars": list(CODEX_FORWARDED),
            "tool_timeout_sec": where.tool_timeout,
            "default_tools_approval_mode": "approve",
        }
        at: tuple[str, ...] = ("mcp_servers",)
        return Part(
            name,
            path,
            "toml",
            lambda doc: table_state(doc, at, "smllm", want),
            _then(lambda doc: table_put(doc, at, "smllm", want)),
            _then(lambda doc: table_drop(doc, at, "smllm")),
        )
    if harness == "opencode":
        want = {
            "type": "local",
            "command": [where.smllm, "mcp"],
            "enabled": True,
            "timeout": where.tool_timeout * 1000,  # ms; OpenCode's default is 60 s
        }
        at = ("mcp",)
    else:
        want, at = mcp_entry(where), ("mcpServers",)
    kind = "external" if harness == "claude" and where.scope == "user" else "json"
    return Part(
        name,
        path,
        kind,
        lambda doc: entry_state(doc, at, "smllm", want),
        _then(lambda doc: put_entry(doc, at, "smllm", want)),
        _then(lambda doc: drop_entry(doc, at, "smllm")),
        want,
    )


def _paths(where: Where, harness: str) -> dict[str, str]:
    """Each part's file for `where.scope` (cli-and-harnesses.md §6's table)."""
    env, home, j = where.env, where.home, os.path.join
    if where.scope == "project":
        base = where.root
        agents = j(base, "AGENTS.md")
        claude_dir = j(base, ".claude")
        codex = j(base, ".codex")
        copilot = {"instructions": agents, "mcp": j(base, ".mcp.json")}
        copilot["hooks"] = j(base, ".github", "hooks", "smllm.json")
        opencode = {"instructions": agents, "mcp": opencode_config_path(base)}
        opencode["plugin"] = j(base, ".opencode", "plugins", "smllm.js")
        claude_mcp = j(base, ".mcp.json")
        claude_md = claude_target(base)
    else:
        claude_dir = j(home, ".claude")
        codex = env.get("CODEX_HOME") or j(home, ".codex")
        cop = env.get("COPILOT_HOME") or j(home, ".copilot")
        copilot = {
            "instructions": j(cop, "copilot-instructions.md"),
            "mcp": j(cop, "mcp-config.json"),
            "hooks": j(cop, "hooks", "smllm.json"),
        }
        oc = j(env.get("XDG_CONFIG_HOME") or j(home, ".config"), "opencode")
        opencode = {
            "instructions": j(oc, "AGENTS.md"),
            "mcp": opencode_config_path(oc),
            "plugin": j(oc, "plugins", "smllm.js"),
        }
        claude_mcp = j(home, ".claude.json")
        claude_md = claude_target(claude_dir)
        agents = ""
    settings = j(claude_dir, "settings.json")
    return {
        "claude": {
            "instructions": claude_md,
            "mcp": claude_mcp,
            "hooks": settings,
            "permissions": settings,
            "statusline": j(claude_dir, "skills", "smllm-statusline", "SKILL.md"),
        },
        "codex": {
            "instructions": j(codex, "AGENTS.md") if where.scope == "user" else agents,
            "mcp": j(codex, "config.toml"),
            "hooks": j(codex, "hooks.json"),
        },
        "copilot": copilot,
        "opencode": opencode,
        "agents": {"instructions": agents},
    }[harness]


def parts_of(where: Where, harness: str) -> list[Part]:
    """The harness's parts for `where`, in the spec's order (`agents` has no user scope:
    the caller refuses it)."""
    paths = _paths(where, harness)
    return [_part(where, harness, name, paths[name]) for name in HARNESSES[harness]]
