"""Hooks that don't run are seen (issue 20 §3): when each client's hooks last left a trace in
this project, read from what smllm records anyway (no write on the hook path), and the line an
MCP reply carries when the client's hooks are installed but didn't run for its session.

What a hook leaves: `session-start` binds a session (a `bind` audit record, always);
`user-prompt-submit` writes a `prompt` record only when it clears a yield or a block; `stop`
writes a `block` or `runaway` record only when it holds a stop. So `never` is sure for
`session-start`, and for the other two means "never had to act".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..engine.records import Session
    from ..store.base import SessionStore

__all__ = [
    "CLIENT_NAMES",
    "HOOK_RECORDS",
    "HooksWatch",
    "hooks_installed",
    "last_ran",
    "not_running_note",
]

#: MCP clientInfo names (real-clients.md) → smllm's harness names
CLIENT_NAMES = {
    "claude-code": "claude",
    "codex-mcp-client": "codex",
    "copilot-cli": "copilot",
    "opencode": "opencode",
}

#: each hook → the audit kinds it writes when it acts
HOOK_RECORDS = {
    "session-start": ("bind",),
    "user-prompt-submit": ("prompt",),
    "stop": ("block", "runaway"),
}

#: the part that runs a harness's hooks (OpenCode's plugin runs them)
_HOOK_PART = {"claude": "hooks", "codex": "hooks", "copilot": "hooks", "opencode": "plugin"}

_FIX = {
    "claude": (
        "ask the user to restart Claude Code in this folder (it reads hooks when it starts) "
        "and to check them in /hooks"
    ),
    "codex": (
        "ask the user to trust smllm's three hooks in Codex's /hooks (Codex skips untrusted "
        "hooks without a word) and to trust this project"
    ),
    "copilot": (
        "ask the user to trust this folder in Copilot CLI (it reads .github/hooks only in a "
        "trusted folder), then to restart it"
    ),
    "opencode": (
        "ask the user to restart OpenCode here (it loads .opencode/plugins/smllm.js when it "
        "starts and drops a plugin that fails to load without a word: opencode --print-logs "
        "shows why)"
    ),
}

_TITLES = {
    "claude": "Claude Code",
    "codex": "Codex",
    "copilot": "Copilot CLI",
    "opencode": "OpenCode",
}


def _inside(path: str, root: str) -> bool:
    path, root = os.path.abspath(path), os.path.abspath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def last_ran(user: SessionStore, harness: str, root: str | None) -> dict[str, str | None]:
    """When each hook of `harness` last acted in the project at `root` (any folder: None), as
    the UTC time of its latest record, or None."""
    sessions: Iterable[Session] = (
        s
        for s in user.sessions()
        if s.harness == harness and (root is None or _inside(s.cwd, root))
    )
    latest: dict[str, str | None] = dict.fromkeys(HOOK_RECORDS)
    kinds = {kind: hook for hook, found in HOOK_RECORDS.items() for kind in found}
    for session in sessions:
        for record in user.audit(session.key):
            hook = kinds.get(record.kind)
            if hook is None:
                continue
            if hook == "session-start" and record.detail.get("harness") != harness:
                continue
            before = latest[hook]
            if before is None or record.at > before:
                latest[hook] = record.at
    return latest


def hooks_installed(harness: str, root: str, home: str, env: Mapping[str, str]) -> bool:
    """Whether `harness`'s hooks (OpenCode: its plugin) are installed for the project at
    `root`, in its files or the user's; a file that can't be read counts as not installed."""
    # the install's part table (and through it tomlkit) only once a client is known
    from .install.parts import Where, parts_of
    from .install.plan import make_plan

    part_name = _HOOK_PART.get(harness)
    if part_name is None:
        return False
    for scope in ("project", "user"):
        where = Where(scope, root, home, "smllm", env)
        parts = [p for p in parts_of(where, harness) if p.name == part_name]
        plan = make_plan(parts, set(), False, install=False)
        if any(row.state in ("current", "stale", "edited") for row in plan.rows):
            return True
    return False


def not_running_note(harness: str) -> str:
    """The line an MCP reply carries when `harness`'s hooks are installed but its session was
    never bound by its session-start hook."""
    return (
        f"note: smllm's hooks for {_TITLES[harness]} are installed here but didn't run for "
        f"this session, so your stops won't be held; {_FIX[harness]}"
    )


class HooksWatch:
    """For `smllm mcp`: the line a reply carries while the client's hooks are installed in the
    session's project but never ran there since the server started (so no session of the
    client was bound by its session-start hook, and the agent's session came from a keyless
    enter over MCP). Once a hook of that client runs in the project, the line goes."""

    def __init__(self, user: SessionStore, env: Mapping[str, str], started: str) -> None:
        self.user, self.env, self.started = user, env, started
        self.installed: dict[tuple[str, str], bool] = {}
        self.running: set[tuple[str, str]] = set()

    def note(self, client: str | None, session: Session | None) -> str | None:
        harness = CLIENT_NAMES.get(client or "")
        if harness is None or session is None or session.harness != "mcp":
            return None
        from .install.command import project_root

        root = project_root(session.cwd)
        key = (harness, root)
        if key in self.running:
            return None
        if key not in self.installed:
            home = self.env.get("HOME") or os.path.expanduser("~")
            self.installed[key] = hooks_installed(harness, root, home, self.env)
        if not self.installed[key]:
            return None
        # a session-start of this client that ran since makes a session of its harness: the
        # sessions' own fields tell, without reading any audit
        if any(
            s.harness == harness and s.created >= self.started and _inside(s.cwd, root)
            for s in self.user.sessions()
        ):
            self.running.add(key)
            return None
        return not_running_note(harness)
