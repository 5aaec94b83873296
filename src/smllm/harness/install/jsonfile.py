"""JSON config files and smllm's entries in them (cli-and-harnesses.md §6, "Merges").

smllm owns only what it writes: the `smllm` server entry, hook handlers whose command runs
`smllm harness hook …` (any `smllm` by path), and the `mcp__smllm__smllm` permission.
Everything else is kept: other keys in their order, the user's own handlers and keys (such as
`matcher`) in the same group, other array items. Files are written with two-space indents and a
final newline, with CRLF endings when the file had them. Edits work on a copy; the caller
compares it with what was read and writes only a change. A file whose client reads comments
(OpenCode's config) may have them, and trailing commas: such a file is edited in its text
(jsonc.py), so that they stay.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from . import jsonc

__all__ = [
    "DERIVED",
    "Broken",
    "drop_entry",
    "drop_hooks",
    "drop_value",
    "dump_json",
    "edit_json",
    "entry_state",
    "hooks_state",
    "is_own_command",
    "parse_json",
    "put_entry",
    "put_hooks",
    "put_value",
    "runs_smllm",
    "same_but_path",
    "state_of",
    "value_state",
]


#: the file names of smllm's console script
_NAMES = ("smllm", "smllm.exe")


class Broken(Exception):
    """A file that doesn't parse, or whose shape smllm can't merge into; the message says why."""


def _plain(text: str | None) -> bool:
    """Whether `text` is plain JSON (or absent or blank)."""
    if text is None or not text.strip():
        return True
    try:
        json.loads(text.removeprefix("\ufeff"))
    except ValueError:
        return False
    return True


def parse_json(text: str | None, comments: bool = False) -> dict[str, Any]:
    """The object a JSON file holds ({} for an absent or blank file); with `comments`, a file
    with comments and trailing commas (JSONC) is read too."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except ValueError as exc:
        if not comments:
            raise Broken(f"not JSON: {exc}") from None
        try:
            data = jsonc.loads(text)
        except jsonc.JsoncError as jsonc_exc:
            raise Broken(f"not JSON, even with comments: {jsonc_exc}") from None
    if not isinstance(data, dict):
        raise Broken("must hold a JSON object")
    return data


def dump_json(doc: dict[str, Any], like: str | None) -> str:
    """`doc` as smllm writes JSON: two-space indents, a final newline, `like`'s line endings."""
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return text.replace("\n", "\r\n") if like and "\r\n" in like else text


def edit_json(text: str | None, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The text of a JSON file that held `text` (whose value is `old`) once it holds `new`;
    None to remove the file. Plain JSON is written as `dump_json` writes it; JSONC is edited
    where it differs, keeping its comments, commas and layout (a file left empty but for
    comments stays)."""
    if _plain(text):
        return None if new == {} else dump_json(new, text)
    assert text is not None
    edited = jsonc.patch(text, old, new)
    return None if new == {} and not jsonc.has_comments(edited) else edited


def _table(doc: dict[str, Any], path: tuple[str, ...], make: bool) -> dict[str, Any] | None:
    """The object at `path` (made when `make`), None when absent; one that isn't an object is
    Broken."""
    here = doc
    for i, key in enumerate(path):
        nxt = here.get(key)
        if nxt is None:
            if not make:
                return None
            nxt = here[key] = {}
        if not isinstance(nxt, dict):
            raise Broken(f"{'.'.join(path[: i + 1])} must be an object")
        here = nxt
    return here


def _prune(doc: dict[str, Any], path: tuple[str, ...]) -> None:
    """Delete the objects along `path` that a removal left empty, innermost first."""
    for depth in range(len(path), 0, -1):
        parent = _table(doc, path[: depth - 1], False)
        if parent is None:
            return
        child = parent.get(path[depth - 1])
        if child not in ({}, []):
            return
        del parent[path[depth - 1]]


# -- an entry by key: mcpServers.smllm, mcp.smllm --------------------------------------------


def _bare(value: Any) -> Any:
    """`value` with every command that runs smllm by a path (`/venv/bin/smllm mcp`, a command
    list's `/venv/bin/smllm`) written as bare `smllm`: two smllm entries that differ only there
    are one entry as two machines or two installs of smllm wrote it."""
    if isinstance(value, dict):
        return {key: _bare(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_bare(item) for item in value]
    if isinstance(value, str) and os.path.basename(value.replace("\\", "/")) in _NAMES:
        return "smllm"  # a path alone (a command field, not a shell line): spaces and all
    if isinstance(value, str) and runs_smllm(value):
        value = value.removeprefix("& ")
        words = shlex.split(value) if value[:1] in ("'", '"') else value.split()
        return " ".join(["smllm", *words[1:]])
    return value


def same_but_path(have: Any, want: Any) -> bool:
    """Whether smllm's entry `have` is `want` but for the path it runs smllm by."""
    return bool(_bare(have) == _bare(want))


#: the keys of an MCP server entry whose value smllm derives (the client's tool timeout, from
#: the machines' longest command): another value there is `stale`, not an edit
DERIVED = ("timeout", "tool_timeout_sec")


def state_of(have: Any, want: Any, derived: tuple[str, ...] = ()) -> str:
    """`current` when smllm's entry is what this smllm writes, `stale` when it differs only in
    the path to smllm or in a `derived` key's value (install rewrites it without --force, as
    another machine's install or an older smllm wrote it), else `edited`."""
    if have == want:
        return "current"
    if derived and isinstance(have, dict) and isinstance(want, dict):
        have = {k: v for k, v in have.items() if k not in derived}
        want = {k: v for k, v in want.items() if k not in derived}
    return "stale" if same_but_path(have, want) else "edited"


def entry_state(doc: dict[str, Any], path: tuple[str, ...], key: str, want: Any) -> str:
    table = _table(doc, path, False)
    if table is None or key not in table:
        return "missing"
    return state_of(table[key], want, DERIVED)


def put_entry(doc: dict[str, Any], path: tuple[str, ...], key: str, want: Any) -> None:
    table = _table(doc, path, True)
    assert table is not None
    table[key] = want


def drop_entry(doc: dict[str, Any], path: tuple[str, ...], key: str) -> None:
    table = _table(doc, path, False)
    if table is not None and key in table:
        del table[key]
        _prune(doc, path)


# -- a value in a list: permissions.allow ----------------------------------------------------


def _list(doc: dict[str, Any], path: tuple[str, ...], make: bool) -> list[Any] | None:
    table = _table(doc, path[:-1], make)
    if table is None:
        return None
    items = table.get(path[-1])
    if items is None and make:
        items = table[path[-1]] = []
    if items is not None and not isinstance(items, list):
        raise Broken(f"{'.'.join(path)} must be a list")
    return items


def value_state(doc: dict[str, Any], path: tuple[str, ...], value: str) -> str:
    items = _list(doc, path, False)
    return "current" if items is not None and value in items else "missing"


def put_value(doc: dict[str, Any], path: tuple[str, ...], value: str) -> None:
    items = _list(doc, path, True)
    assert items is not None
    if value not in items:
        items.append(value)


def drop_value(doc: dict[str, Any], path: tuple[str, ...], value: str) -> None:
    items = _list(doc, path, False)
    if items is not None and value in items:
        items[:] = [item for item in items if item != value]
        _prune(doc, path)


# -- hook handlers: {"hooks": {EVENT: [{"matcher"?, "hooks": [HANDLER…]}]}} -----------------


def runs_smllm(command: Any, *args: str) -> bool:
    """Whether a command runs `smllm`, or any path whose file name is `smllm`, with `args`
    first (a command that is only that path, without `args`): a quoted path is read as a POSIX
    shell would, a bare one split at spaces (a Windows path keeps its backslashes)."""
    if not isinstance(command, str):
        return False
    command = command.removeprefix("& ")  # PowerShell's call operator before a quoted path
    try:
        words = shlex.split(command) if command[:1] in ("'", '"') else command.split()
    except ValueError:
        return False
    if len(words) <= len(args) or words[1 : 1 + len(args)] != list(args):
        return False
    return os.path.basename(words[0].replace("\\", "/")) in _NAMES


def is_own_command(command: Any) -> bool:
    """Whether a hook command is smllm's: `smllm` (any path to it), then `harness hook `."""
    return runs_smllm(command, "harness", "hook")


def _groups(doc: dict[str, Any], event: str) -> list[Any]:
    hooks = _table(doc, ("hooks",), False)
    groups = [] if hooks is None else hooks.get(event, [])
    if not isinstance(groups, list):
        raise Broken(f"hooks.{event} must be a list")
    return groups


def _own(doc: dict[str, Any], event: str, key: str) -> list[tuple[list[Any], int]]:
    """smllm's handlers of `event`: (the handler list, index) each."""
    found = []
    for group in _groups(doc, event):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            continue
        for i, handler in enumerate(handlers):
            if isinstance(handler, dict) and is_own_command(handler.get(key)):
                found.append((handlers, i))
    return found


def hooks_state(doc: dict[str, Any], want: dict[str, dict[str, Any]], key: str) -> str:
    """`current` when each event has exactly smllm's one handler as this smllm writes it,
    `missing` when no event has one of smllm's, `stale` when they differ from it only in the
    path to smllm, else `edited`."""
    owned = {event: _own(doc, event, key) for event in want}
    if not any(owned.values()):
        return "missing"
    states = set()
    for event, handler in want.items():
        found = owned[event]
        if len(found) != 1:
            return "edited"
        states.add(state_of(found[0][0][found[0][1]], handler))
    for state in ("edited", "stale"):
        if state in states:
            return state
    return "current"


def put_hooks(doc: dict[str, Any], want: dict[str, dict[str, Any]], key: str) -> None:
    """Each event gets smllm's handler: one already current stays as it is (Codex drops its
    trust in a rewritten entry), an edited one is replaced where it stands, other handlers of
    smllm's are removed, and a new one goes in a group of its own at the end."""
    for event, handler in want.items():
        found = _own(doc, event, key)
        if len(found) == 1 and found[0][0][found[0][1]] == handler:
            continue
        if found:
            handlers, i = found[0]
            handlers[i] = handler
            _drop_handlers(doc, event, key, keep=handlers[i])
            continue
        hooks = _table(doc, ("hooks",), True)
        assert hooks is not None
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise Broken(f"hooks.{event} must be a list")
        groups.append({"hooks": [handler]})


def _drop_handlers(doc: dict[str, Any], event: str, key: str, keep: Any = None) -> None:
    """Remove smllm's handlers of `event` (but `keep`, by identity); a group left without
    handlers is deleted, then an event left without groups, then an empty `hooks`."""
    groups = _groups(doc, event)
    kept_groups = []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            kept_groups.append(group)
            continue
        left = [
            h
            for h in handlers
            if h is keep or not (isinstance(h, dict) and is_own_command(h.get(key)))
        ]
        if len(left) != len(handlers):
            handlers[:] = left
            if not left:
                continue
        kept_groups.append(group)
    if len(kept_groups) != len(groups):
        groups[:] = kept_groups
        _prune(doc, ("hooks", event))


def drop_hooks(doc: dict[str, Any], events: list[str], key: str) -> None:
    for event in events:
        _drop_handlers(doc, event, key)
