"""Compute, then apply: every part's state, what install would do with it, and the new text of
each file, worked out before anything is written (cli-and-harnesses.md §6, "Install order").

States: `current` (what this smllm would write is there), `missing`, `stale` (smllm's entry
is there as another machine's or another install's smllm wrote it: it differs only in the path
to smllm, and install rewrites it without --force), `edited` (smllm's entry is there but
differs), `declined`, and `unreadable` (its file doesn't parse: install refuses; status says
why in a note). Actions: `written`, `current`, `removed`, `declined`, `edited, left
alone`, and `left alone` for the other parts of a refused install.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

from .external import user_mcp_state
from .jsonc import reads_comments
from .jsonfile import Broken, edit_json, parse_json
from .parts import Part
from .tomlfile import dump_toml, parse_toml
from .writing import read_text

__all__ = ["Plan", "Row", "make_plan"]


class Row(NamedTuple):
    part: str
    path: str
    state: str
    action: str | None  # None for status


class Plan(NamedTuple):
    rows: list[Row]
    #: path → new text, or None to remove the file (with the text an emptied symlink keeps)
    writes: dict[str, tuple[str | None, str]]
    #: Claude's user-scope server: (its state, the entry to add or None to remove), or None
    external: tuple[str, Any] | None
    #: (path, why) of each file that doesn't parse
    broken: list[tuple[str, str]]
    edited: list[Row]  # edited parts install leaves alone (the install is refused)


def _parse(kind: str, text: str | None, path: str) -> Any:
    if kind == "json":
        # OpenCode reads comments and trailing commas in its config: so does smllm there
        return parse_json(text, comments=reads_comments(path))
    if kind == "toml":
        return parse_toml(text)
    return text


def _dump(kind: str, doc: Any, like: str | None, old: Any) -> str | None:
    if kind == "json":
        return edit_json(like, old, doc)  # JSONC (only read where allowed) is edited in place
    if kind == "toml":
        text = dump_toml(doc, like)
        return None if not text.strip("\ufeff \t\r\n") else text
    if doc is None or not doc.strip():
        return None
    return str(doc)


def _changed(kind: str, old: Any, new: Any, old_text: str | None, new_text: str | None) -> bool:
    if kind == "json":
        return bool(old != new)  # JSON read back the same is left as the user wrote it
    return old_text != new_text


def _empty(kind: str) -> str:
    return "{}\n" if kind == "json" else ""


def _action(state: str, declined: bool, force: bool) -> str:
    if declined:
        return "declined" if state in ("missing", "unreadable") else "removed"
    if state == "current":
        return "current"
    if state == "edited" and not force:
        return "edited, left alone"
    return "written"


def make_plan(parts: list[Part], declined: set[str], force: bool, install: bool) -> Plan:
    """The rows (a state per part, and an action when `install`) and the writes install would
    do. Reads files; writes nothing."""
    rows: list[Row] = []
    writes: dict[str, tuple[str | None, str]] = {}
    broken: list[tuple[str, str]] = []
    external = None
    by_file: dict[str, list[Part]] = {}
    for part in parts:
        by_file.setdefault(part.path, []).append(part)
    states: dict[str, str] = {}
    for path, group in by_file.items():
        kind = group[0].kind
        try:
            if kind == "external":
                states[group[0].name] = user_mcp_state(path, group[0].want)
                continue
            text = read_text(path)
            old = _parse(kind, text, path)
            for part in group:
                states[part.name] = part.state(old)
        except Broken as exc:
            broken.append((path, str(exc)))
            for part in group:
                states[part.name] = "unreadable"
            continue
        if not install:
            continue
        new = copy.deepcopy(old) if kind == "json" else _parse(kind, text, path)
        for part in group:
            state = states[part.name]
            if part.name in declined:
                if state != "missing":
                    new = part.drop(new)
            elif state in ("missing", "stale") or (state == "edited" and force):
                new = part.put(new)
        new_text = _dump(kind, new, text, old)
        if _changed(kind, old, new, text, new_text) and (text is not None or new_text):
            writes[path] = (new_text, _empty(kind))
    for part in parts:
        state = states[part.name]
        is_declined = part.name in declined
        if not install:
            rows.append(Row(part.name, part.path, "declined" if is_declined else state, None))
            continue
        action = _action(state, is_declined, force)
        rows.append(Row(part.name, part.path, "declined" if is_declined else state, action))
        if part.kind == "external" and action in ("written", "removed"):
            external = (state, None if is_declined else part.want)
    broken = [(path, why) for path, why in broken if _needed(by_file[path], declined)]
    edited = [row for row in rows if row.action == "edited, left alone"]
    return Plan(rows, writes, external, broken, edited)


def _needed(group: list[Part], declined: set[str]) -> bool:
    """Whether install must change a file that doesn't parse (a declined part's file is not
    read)."""
    return any(part.name not in declined for part in group)
