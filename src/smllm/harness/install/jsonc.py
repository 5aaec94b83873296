"""JSON with comments and trailing commas (JSONC), as OpenCode reads `opencode.json` and
`opencode.jsonc`, and smllm's edits of such a file made in its text (cli-and-harnesses.md §6,
"Merges"): a rewrite from the parsed value would drop the user's comments.

`loads` reads JSONC: `//` and `/* */` comments and a comma before a closing bracket. `patch`
turns a text whose value is `old` into one whose value is `new`, changing only the members
and elements that differ: everything else (comments, spacing, key order, line endings, a BOM)
stays byte for byte; a new member goes after its siblings, indented as they are. Stdlib only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "JsoncError",
    "comment_count",
    "has_comments",
    "loads",
    "opencode_config_path",
    "patch",
    "reads_comments",
]


class JsoncError(ValueError):
    """Text that isn't JSONC; the message says what and where."""


def opencode_config_path(folder: str) -> str:
    """OpenCode's config file in `folder`: `opencode.jsonc` when only that one exists, else
    `opencode.json` (OpenCode reads both; smllm writes one)."""
    jsonc = os.path.join(folder, "opencode.jsonc")
    plain = os.path.join(folder, "opencode.json")
    if os.path.lexists(jsonc) and not os.path.lexists(plain):
        return jsonc
    return plain


def reads_comments(path: str) -> bool:
    """Whether the client that reads `path` takes JSONC: OpenCode's config, any `.jsonc`."""
    name = os.path.basename(path)
    return name == "opencode.json" or name.endswith(".jsonc")


# -- the parser: values with the spans of their text --------------------------------------------


@dataclass
class Node:
    """A value and where its text lies, [start, end); a container's members or elements."""

    start: int
    end: int
    value: Any
    items: list[Item] = field(default_factory=list)


@dataclass
class Item:
    """A member of an object (`key` set) or an element of an array."""

    key: str | None
    start: int  # the key's opening quote; an element's first character
    node: Node
    comma: int | None  # where the comma after it is, if one is


_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.S)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_BLANK = " \t\r\n"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.comments = 0

    def fail(self, what: str, at: int) -> JsoncError:
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JsoncError(f"{what}: line {line} column {column} (char {at})")

    def skip(self, at: int) -> int:
        """The offset of the next token after `at`: blanks and comments skipped."""
        text = self.text
        while at < len(text):
            if text[at] in _BLANK:
                at += 1
            elif text.startswith("//", at):
                self.comments += 1
                end = text.find("\n", at)
                at = len(text) if end < 0 else end
            elif text.startswith("/*", at):
                self.comments += 1
                end = text.find("*/", at + 2)
                if end < 0:
                    raise self.fail("Unterminated comment", at)
                at = end + 2
            else:
                break
        return at

    def document(self) -> Node:
        start = 1 if self.text.startswith("\ufeff") else 0
        node = self.value(self.skip(start))
        end = self.skip(node.end)
        if end != len(self.text):
            raise self.fail("Extra data", end)
        return node

    def value(self, at: int) -> Node:
        text = self.text
        if at >= len(text):
            raise self.fail("Expecting value", at)
        char = text[at]
        if char == "{":
            return self.container(at, "}")
        if char == "[":
            return self.container(at, "]")
        if char == '"':
            return self.string(at)
        found = _NUMBER.match(text, at)
        if found:
            return Node(at, found.end(), json.loads(found.group()))
        for word, value in _LITERALS.items():
            if text.startswith(word, at):
                return Node(at, at + len(word), value)
        raise self.fail("Expecting value", at)

    def string(self, at: int) -> Node:
        found = _STRING.match(self.text, at)
        if found is None:
            raise self.fail("Unterminated string or a control character in it", at)
        try:
            value = json.loads(found.group())
        except ValueError:
            raise self.fail("Invalid escape in string", at) from None
        return Node(at, found.end(), value)

    def container(self, start: int, close: str) -> Node:
        text = self.text
        items: list[Item] = []
        at = self.skip(start + 1)
        while not text.startswith(close, at):
            if close == "}":
                if not text.startswith('"', at):
                    raise self.fail("Expecting property name enclosed in double quotes", at)
                key = self.string(at)
                colon = self.skip(key.end)
                if not text.startswith(":", colon):
                    raise self.fail("Expecting ':' delimiter", colon)
                node = self.value(self.skip(colon + 1))
                item = Item(key.value, at, node, None)
            else:
                item = Item(None, at, self.value(at), None)
            items.append(item)
            at = self.skip(item.node.end)
            if text.startswith(",", at):
                item.comma = at
                at = self.skip(at + 1)  # a trailing comma: the bracket may come next
            elif not text.startswith(close, at):
                raise self.fail("Expecting ',' delimiter", at)
        if close == "}":
            value: Any = {item.key: item.node.value for item in items}
        else:
            value = [item.node.value for item in items]
        return Node(start, at + 1, value, items)


def _tree(text: str) -> tuple[Node, int]:
    """The document's root node, and how many comments the text has."""
    parser = _Parser(text)
    return parser.document(), parser.comments


def loads(text: str) -> Any:
    """The value of a JSONC text (a BOM first is allowed); JsoncError when it isn't JSONC."""
    return _tree(text)[0].value


def comment_count(text: str) -> int:
    """How many comments a JSONC text has (outside its strings)."""
    return _tree(text)[1]


def has_comments(text: str) -> bool:
    """Whether a JSONC text has a comment."""
    return comment_count(text) > 0


# -- edits ---------------------------------------------------------------------------------------


class _Op(NamedTuple):
    kind: str  # "set", "add" or "del"
    path: tuple[str | int, ...]  # the container's, from the root
    key: str | int | None  # the member's key or the element's index; None for an added element
    value: Any = None


def _same(a: Any, b: Any) -> bool:
    """JSON equality: `1`, `1.0` and `true` differ; key order doesn't count."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _diff(path: tuple[str | int, ...], old: Any, new: Any) -> list[_Op]:
    """The edits that turn container `old` (at `path`) into `new`, in an order in which each
    one's path and index still hold when it is made."""
    ops: list[_Op] = []
    if isinstance(old, dict):
        ops += [_Op("del", path, key) for key in old if key not in new]
        for key, value in new.items():
            if key not in old:
                ops.append(_Op("add", path, key, value))
            elif not _same(old[key], value):
                ops += _change(path, key, old[key], value)
        return ops
    if len(old) == len(new):
        for i, (was, now) in enumerate(zip(old, new, strict=True)):
            if not _same(was, now):
                ops += _change(path, i, was, now)
        return ops
    # keep the old elements that start `new` in order, drop the others, append the rest
    kept, dropped = 0, []
    for i, was in enumerate(old):
        if kept < len(new) and _same(was, new[kept]):
            kept += 1
        else:
            dropped.append(i)
    ops += [_Op("del", path, i) for i in reversed(dropped)]
    return ops + [_Op("add", path, None, value) for value in new[kept:]]


def _change(path: tuple[str | int, ...], key: str | int, old: Any, new: Any) -> list[_Op]:
    """A changed member or element: edited inside when it stays an object or a list (the
    comments in it stay), else its value replaced."""
    for kind in (dict, list):
        if isinstance(old, kind) and isinstance(new, kind):
            return _diff((*path, key), old, new)
    return [_Op("set", path, key, new)]


def patch(text: str, old: Any, new: Any) -> str:
    """`text` (a JSONC document whose value is `old`) with the value `new`, edited in place."""
    for op in _diff((), old, new):
        text = _apply(text, op)
    return text


def _find(node: Node, key: str | int) -> Item | None:
    """A container's item: the last member named `key` (the one that counts), element `key`."""
    if isinstance(key, int):
        return node.items[key]
    found = [item for item in node.items if item.key == key]
    return found[-1] if found else None


def _at(text: str, path: tuple[str | int, ...]) -> Node:
    node = _tree(text)[0]
    for key in path:
        item = _find(node, key)
        assert item is not None, path
        node = item.node
    return node


def _apply(text: str, op: _Op) -> str:
    if op.kind == "set":
        assert op.key is not None
        item = _find(_at(text, op.path), op.key)
        assert item is not None
        node = item.node
        return _splice(text, node.start, node.end, _render(op.value, _Style(text, item.start)))
    if op.kind == "del":
        assert op.key is not None
        # every member of that name (JSON lets a key repeat; the last one counts)
        while (item := _find(container := _at(text, op.path), op.key)) is not None:
            text = _remove(text, container, item)
            if isinstance(op.key, int):
                break
        return _collapse(text, op.path)
    return _insert(text, _at(text, op.path), op.key, op.value)


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


class _Style:
    """How the text around `at` is laid out: its line's indent, the file's indent unit and
    line ending."""

    def __init__(self, text: str, at: int) -> None:
        line = text.rfind("\n", 0, at) + 1
        lead = text[line:at]
        self.indent = lead[: len(lead) - len(lead.lstrip(" \t"))]
        self.starts_line = not lead.strip(" \t")  # nothing but the indent before `at`
        self.newline = "\r\n" if "\r\n" in text else "\n"
        unit = re.search(r"\n([ \t]+)\S", text)
        self.unit = unit.group(1) if unit else "  "
        if self.unit.startswith(" ") and len(self.unit) > 8:
            self.unit = "  "  # the first indented line is deeper than a step: two spaces


def _render(value: Any, style: _Style, compact: bool = False) -> str:
    """`value` as JSON text, its later lines indented to `style`'s line (or on one line)."""
    if compact:
        return json.dumps(value, ensure_ascii=False)
    text = json.dumps(value, indent=style.unit, ensure_ascii=False)
    return text.replace("\n", style.newline + style.indent)


def _line_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """[start, end) widened to whole lines (and the line break after), when nothing but
    blanks shares those lines with it."""
    line = text.rfind("\n", 0, start) + 1
    if text[line:start].strip(" \t"):
        return None
    after = end
    while after < len(text) and text[after] in " \t\r":
        after += 1
    if after < len(text) and text[after] != "\n":
        return None
    return line, min(after + 1, len(text))


def _remove(text: str, container: Node, item: Item) -> str:
    index = next(i for i, it in enumerate(container.items) if it is item)
    end = item.comma + 1 if item.comma is not None else item.node.end
    whole = _line_span(text, item.start, end)
    if whole is not None:
        start, end = whole
    elif index == len(container.items) - 1 and not _Style(text, item.start).starts_line:
        start = item.start
        while text[start - 1] in " \t":  # `{"a": 1, "b": 2}`: the space before the last
            start -= 1
    else:
        start = item.start
        while end < len(text) and text[end] in " \t":  # `{"a": 1, "b": 2}`: the space after
            end += 1
    text = _splice(text, start, end, "")
    if item.comma is None and index > 0:
        previous = container.items[index - 1].comma
        assert previous is not None and previous < start
        text = _splice(text, previous, previous + 1, "")  # no trailing comma where none was
    return text


def _collapse(text: str, path: tuple[str | int, ...]) -> str:
    """A container left with nothing inside, not even a comment, written `{}` or `[]`."""
    node = _at(text, path)
    if node.items or text[node.start + 1 : node.end - 1].strip(_BLANK):
        return text
    return _splice(text, node.start + 1, node.end - 1, "")


def _insert(text: str, container: Node, key: str | int | None, value: Any) -> str:
    is_object = isinstance(container.value, dict)
    outer = _Style(text, container.start)
    close = container.end - 1

    def item_text(style: _Style, compact: bool = False) -> str:
        rendered = _render(value, style, compact)
        return f"{json.dumps(key, ensure_ascii=False)}: {rendered}" if is_object else rendered

    if not container.items:
        inner = _Style(text, container.start)
        inner.indent = outer.indent + outer.unit
        new = item_text(inner)
        if not text[container.start + 1 : close].strip(_BLANK):  # `{}`, `{ }`, `{\n}`
            body = f"{outer.newline}{inner.indent}{new}{outer.newline}{outer.indent}"
            return _splice(text, container.start + 1, close, body)
        if _Style(text, close).starts_line:  # comments inside: the item goes after them
            line = text.rfind("\n", 0, close) + 1
            return _splice(text, line, line, f"{inner.indent}{new}{outer.newline}")
        start = close
        while text[start - 1] in " \t":  # `{ /* none */ }`: the space before the bracket
            start -= 1
        body = f"{outer.newline}{inner.indent}{new}{outer.newline}{outer.indent}"
        return _splice(text, start, close, body)
    last = container.items[-1]
    after = last.comma + 1 if last.comma is not None else last.node.end
    at = _line_end(text, after, close)
    if at is None:  # all on one line: `{"a": 1}` gets `, "b": 2` on it
        new = item_text(outer, compact=True)
        if last.comma is not None:
            return _splice(text, after, after, f" {new},")
        return _splice(text, after, after, f", {new}")
    style = _Style(text, last.start)
    if not style.starts_line:
        style.indent = outer.indent + outer.unit
    new = item_text(style) + ("," if last.comma is not None else "")  # the file's comma style
    text = _splice(text, at, at, f"{style.newline}{style.indent}{new}")
    if last.comma is None:
        text = _splice(text, last.node.end, last.node.end, ",")
    return text


def _line_end(text: str, at: int, close: int) -> int | None:
    """Where the line that `at` is on ends (before its line break), past the comments on it;
    None when the closing bracket at `close` comes first."""
    while at < close:
        char = text[at]
        if char == "\n":
            return at - 1 if text[at - 1] == "\r" else at
        if char in " \t\r":
            at += 1
        elif text.startswith("//", at):
            at = text.find("\n", at)
        elif text.startswith("/*", at):
            at = text.index("*/", at) + 2
        else:
            return None
    return None
