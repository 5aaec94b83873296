"""Where a key or value sits in a TOML file, for config findings at `file:line:col`.

`tomllib` (and `tomlkit`) give values without positions, so this scans the source once
more: table headers, `key = value` lines with dotted and quoted keys, inline tables and
arrays over several lines. It only has to find nodes of a file `tomllib` has already read
without error; a node it can't place is reported without a position.
"""

from __future__ import annotations

import re

from ..findings import Path_

__all__ = ["toml_position"]

_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_DOTTED = re.compile(rf"{_KEY}(?:[ \t]*\.[ \t]*{_KEY})*")
_ONE_KEY = re.compile(_KEY)
_ASSIGN = re.compile(rf"[ \t]*({_DOTTED.pattern})[ \t]*=[ \t]*")
_HEADER = re.compile(rf"[ \t]*\[\[?[ \t]*({_DOTTED.pattern})[ \t]*\]\]?")

Pos = tuple[int, int]


def _keys(dotted: str) -> list[tuple[str, int]]:
    """Each key of a dotted key as TOML reads it, with its offset in `dotted`."""
    import tomllib

    out = []
    for m in _ONE_KEY.finditer(dotted):
        key = m.group()
        if key[:1] in "\"'":
            # the file is valid TOML, so the quoted key is too: let TOML read its escapes
            key = next(iter(tomllib.loads(f"{key} = 0")))
        out.append((key, m.start()))
    return out


def _pos(text: str, offset: int) -> Pos:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def toml_position(text: str, path: Path_, at_key: bool = False) -> Pos | None:
    """1-based (line, column) of the key (`at_key`) or value at `path`, or None. A leading
    byte order mark is no character of the document: columns count from the one after it."""
    if text.startswith("\ufeff"):
        text = text[1:]
    prefix: list[tuple[str, int]] = []  # the current table's keys, offsets within the file
    offset = 0
    wanted = list(path)
    for raw in text.splitlines(keepends=True):
        header = _HEADER.match(raw)
        assign = None if header else _ASSIGN.match(raw)
        if header:
            at = offset + header.start(1)
            prefix = [(k, at + o) for k, o in _keys(header.group(1))]
            names = [k for k, _ in prefix]
            if names[: len(wanted)] == wanted:
                # the table's own name, or a table it holds (`[a.b]` defines `a`): the key
                return _pos(text, prefix[len(wanted) - 1][1])
        elif assign:
            at = offset + assign.start(1)
            full = prefix + [(k, at + o) for k, o in _keys(assign.group(1))]
            names = [k for k, _ in full]
            if names == wanted[: len(names)]:
                if at_key and len(names) == len(wanted):
                    return _pos(text, full[-1][1])
                return _inside(text, offset + assign.end(), path[len(names) :], at_key)
            if names[: len(wanted)] == wanted:  # `a.b = 1` defines the table `a`
                return _pos(text, full[len(wanted) - 1][1])
        offset += len(raw)
    return None


def _inside(text: str, start: int, rest: Path_, at_key: bool) -> Pos | None:
    """The position of `rest` within the value that starts at `start`."""
    at = start
    for index, step in enumerate(rest):
        if isinstance(step, int):
            at = _item(text, at, step)
        else:
            m = re.compile(rf"(?<![\w-]){re.escape(step)}[ \t]*=[ \t]*").search(text, at)
            if m is None:
                return None
            last = index == len(rest) - 1
            at = m.start() if at_key and last else m.end()
        if at < 0:
            return None
    return _pos(text, at)


def _item(text: str, start: int, wanted: int) -> int:
    """The offset of item `wanted` of the array starting at `start`, or -1."""
    if text[start : start + 1] != "[":
        return -1
    depth, count, i, fresh = 0, 0, start, True
    while i < len(text):
        c = text[i]
        if c in "[{":
            if depth == 1 and fresh:
                if count == wanted:
                    return i
                fresh = False
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return -1
        elif c == "#":
            i = text.find("\n", i)
            if i < 0:
                return -1
            continue
        elif c == ",":
            if depth == 1:
                count += 1
                fresh = True
        elif c in "\"'":
            if depth == 1 and fresh:
                if count == wanted:
                    return i
                fresh = False
            triple = text[i : i + 3] == c * 3
            end = _string_end(text, i, c, triple)
            if end < 0:
                return -1
            i = end
            continue
        elif not c.isspace() and depth == 1 and fresh:
            if count == wanted:
                return i
            fresh = False
        i += 1
    return -1


def _string_end(text: str, start: int, quote: str, triple: bool) -> int:
    """The offset just past the string starting at `start`, or -1."""
    close = quote * 3 if triple else quote
    i = start + len(close)
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
        elif text.startswith(close, i):
            return i + len(close)
        else:
            i += 1
    return -1
