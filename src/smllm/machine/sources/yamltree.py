"""Load a machine file as plain data under YAML 1.2 core-schema rules, keeping positions.

PyYAML's composer (C-accelerated when libyaml is present) builds the node graph with marks;
we resolve scalars ourselves because PyYAML's resolver follows YAML 1.1 (``on``/``yes`` as
bools, ``0777`` as octal, ``1_000`` as an int, ``<<`` merges), which machine files must not get.
``yaml`` is imported lazily: this module sits on a hot path that must not pay for it.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from ..findings import Path_


class Pos(NamedTuple):
    line: int  # 1-based
    col: int  # 1-based, in characters


class Duplicate(NamedTuple):
    path: Path_  # the mapping's path + the repeated key
    pos: Pos  # position of the second (repeated) key
    first_line: int  # line of the first occurrence


class YamlDoc(NamedTuple):
    data: dict[str, Any]
    value_pos: dict[Path_, Pos]  # every value node, root () included
    key_pos: dict[Path_, Pos]  # every mapping key, by the path of its value
    duplicates: list[Duplicate]  # in file order; the first value is the one kept in data


class YamlError(Exception):
    def __init__(self, reason: str, pos: Pos | None) -> None:
        super().__init__(reason, pos)
        self.reason = reason
        self.pos = pos

    def __str__(self) -> str:
        if self.pos is None:
            return self.reason
        return f"line {self.pos.line}, column {self.pos.col}: {self.reason}"


_MAX_NODES = 100_000  # alias bombs: a few lines can expand to billions of nodes
_MAX_DEPTH = 200  # far beyond any real machine file; keeps our recursion bounded
# libyaml's composer recurses in C with no guard (it segfaults near 10k levels on an 8 MiB
# stack, ~1.4k on a 512 KiB thread stack). Text whose nesting *could* exceed this goes to the
# pure-Python composer, which fails cleanly with RecursionError.
_C_DEPTH_LIMIT = 600

_Y = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT = _Y + "str", _Y + "null", _Y + "bool", _Y + "int", _Y + "float"
_MAP, _SEQ = _Y + "map", _Y + "seq"
_PLAIN = ""  # our "resolved" tag for untagged plain scalars: no real tag can be empty

# YAML 1.2 core schema, plain scalars only; anything that does not match is a string.
_CORE = re.compile(
    r"""(?P<null>~|null|Null|NULL|)
    |(?P<bool>true|True|TRUE|false|False|FALSE)
    |(?P<int>[-+]?[0-9]+)
    |(?P<oct>0o[0-7]+)
    |(?P<hex>0x[0-9a-fA-F]+)
    |(?P<float>[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)
    |(?P<inf>[-+]?\.(?:inf|Inf|INF))
    |(?P<nan>\.(?:nan|NaN|NAN))""",
    re.VERBOSE,
)
# What each explicit scalar tag accepts (by _CORE group); !!str takes anything.
_TAG_KINDS = {
    _NULL: ("null",),
    _BOOL: ("bool",),
    _INT: ("int", "oct", "hex"),
    _FLOAT: ("float", "inf", "nan", "int"),
}

# YAML's printable set; libyaml would otherwise report these with byte offsets.
_NON_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Indentation plus compact "- ", "? ", ": " indicators at a line start: where block
# collections can begin. Each block level adds a column at least every second level.
_LINE_LEAD = re.compile(r"^[ \t]*(?:[-?:][ \t]+)*", re.MULTILINE)
_OTHER_BREAKS = re.compile("[\r\x85\u2028\u2029]")  # line breaks to YAML, not to "^"


def load_yaml(source: bytes | str) -> YamlDoc:
    """Parse one machine file; raise YamlError (only) for anything that is not one mapping."""
    text = _decode(source)
    bad = _NON_PRINTABLE.search(text)
    if bad is not None:
        ch = ord(bad.group())
        raise YamlError(f"character U+{ch:04X} is not allowed", _pos_of_index(text, bad.start()))
    lines = _OTHER_BREAKS.sub("\n", text) if _OTHER_BREAKS.search(text) else text
    lead = max(map(len, _LINE_LEAD.findall(lines)))
    depth_bound = text.count("[") + text.count("{") + 2 * (lead + 1)
    return _load(text, _loader(depth_bound > _C_DEPTH_LIMIT))


@functools.cache
def _loader(pure: bool) -> Any:
    import yaml

    base = yaml.SafeLoader if pure else getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(base):  # type: ignore[misc, valid-type]
        # Both composers call self.resolve for untagged nodes; we only record whether a scalar
        # was plain, so the YAML 1.1 implicit resolvers never run. (Both also report "! x" as
        # plain, so the non-specific tag "!" resolves like no tag, not as !!str.)
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            if kind is yaml.ScalarNode:
                return _PLAIN if implicit[0] else _STR
            return _MAP if kind is yaml.MappingNode else _SEQ

    return _Loader


def _load(text: str, loader_cls: Any) -> YamlDoc:
    import yaml

    loader = loader_cls(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        raise _within(_from_marked(e), text) from None
    except yaml.YAMLError as e:  # e.g. ReaderError (no mark); its 1st line is the reason
        raise YamlError((str(e).splitlines() or ["invalid YAML"])[0].strip(), None) from None
    except RecursionError:
        # the pure composer's reader stops just past the node that was one level too many
        get_mark = getattr(loader, "get_mark", None)
        pos = _pos(get_mark()) if get_mark is not None else Pos(1, 1)
        raise _within(YamlError("the document is nested too deeply", pos), text) from None
    finally:
        loader.dispose()
    if root is None:
        raise YamlError("the file is empty; a machine file is one mapping", Pos(1, 1))
    if root.id != "mapping":
        raise YamlError("the top level must be a mapping", _pos(root.start_mark))
    b = _Builder()
    data = b.build(root, (), 0)
    return YamlDoc(data, b.value_pos, b.key_pos, b.duplicates)


class _Builder:
    """Turns the node graph into plain data; aliases (shared nodes) are copied."""

    def __init__(self) -> None:
        self.value_pos: dict[Path_, Pos] = {}
        self.key_pos: dict[Path_, Pos] = {}
        self.duplicates: list[Duplicate] = []
        self.count = 0
        self.active: set[int] = set()  # collections on the current path: cycle detection
        self.seen: set[int] = set()  # mappings already built: copies don't re-report duplicates

    def build(self, node: Any, path: Path_, depth: int) -> Any:
        pos = _pos(node.start_mark)
        self.value_pos[path] = pos
        kind = node.id
        # Keys count too: an aliased mapping full of duplicate keys is work without values.
        self.count += len(node.value) + 1 if kind == "mapping" else 1
        if self.count > _MAX_NODES:
            raise YamlError("the document expands to too many nodes (aliases?)", pos)
        if kind == "scalar":
            return _scalar(node, pos)
        if depth >= _MAX_DEPTH:
            raise YamlError("the document is nested too deeply", pos)
        if node.tag != (_MAP if kind == "mapping" else _SEQ):
            known = node.tag in _TAG_KINDS or node.tag in (_STR, _MAP, _SEQ)
            what = f"a {kind} does not fit the tag" if known else "unknown tag"
            raise YamlError(f"{what} {_tag_name(node.tag)}", pos)
        key = id(node)
        if key in self.active:
            raise YamlError("recursive alias: an alias inside the node it refers to", pos)
        self.active.add(key)
        try:
            if kind == "sequence":
                return [
                    self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)
                ]
            report = key not in self.seen  # an alias copy must not report them again
            self.seen.add(key)
            return self._mapping(node, path, depth, report)
        finally:
            self.active.discard(key)

    def _mapping(self, node: Any, path: Path_, depth: int, report: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for knode, vnode in node.value:
            kpos = _pos(knode.start_mark)
            if knode.id != "scalar":
                raise YamlError("a mapping key must be a plain scalar", kpos)
            if knode.tag not in (_PLAIN, _STR):
                _scalar(knode, kpos)  # only to reject a key that does not fit its tag
            # The key as written: "on", "1", "true" stay text, and "<<" is just a key.
            name: str = knode.value
            kpath = (*path, name)
            if name in first_line:
                if report:
                    self.duplicates.append(Duplicate(kpath, kpos, first_line[name]))
                continue  # the first value wins; leave its positions alone
            first_line[name] = kpos.line
            self.key_pos[kpath] = kpos
            out[name] = self.build(vnode, kpath, depth + 1)
        return out


def _scalar(node: Any, pos: Pos) -> Any:
    tag: str = node.tag
    value: str = node.value
    if tag == _STR:
        return value
    if tag == _PLAIN:
        m = _CORE.fullmatch(value)
        return value if m is None else _convert(m.lastgroup, value, pos)
    kinds = _TAG_KINDS.get(tag)
    if kinds is None:
        if tag in (_MAP, _SEQ):
            raise YamlError(f"a scalar does not fit the tag {_tag_name(tag)}", pos)
        raise YamlError(f"unknown tag {_tag_name(tag)}", pos)
    m = _CORE.fullmatch(value)
    if m is None or m.lastgroup not in kinds:
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise YamlError(f"{shown!r} does not fit the tag {_tag_name(tag)}", pos)
    result = _convert(m.lastgroup, value, pos)
    return float(result) if tag == _FLOAT else result


def _convert(kind: str | None, value: str, pos: Pos) -> Any:
    if kind == "null":
        return None
    if kind == "bool":
        return value[0] in "tT"
    if kind == "int":
        try:
            return int(value)
        except ValueError:  # over sys.get_int_max_str_digits()
            raise YamlError("the integer is too long", pos) from None
    if kind == "oct":
        return int(value[2:], 8)
    if kind == "hex":
        return int(value[2:], 16)
    if kind == "inf":
        return float("-inf") if value[0] == "-" else float("inf")
    if kind == "nan":
        return float("nan")
    return float(value)


def _decode(source: bytes | str) -> str:
    if isinstance(source, str):
        return source[1:] if source.startswith("\ufeff") else source
    # YAML allows a byte order mark at the start; it is no character of the document, so it
    # goes before decoding, and an error's offset then counts within the same bytes as `before`
    body = source[3:] if source.startswith(b"\xef\xbb\xbf") else source
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        before = body[: e.start].decode("utf-8", "replace")
        raise YamlError(f"not UTF-8: {e.reason}", _pos_of_index(before, len(before))) from None


def _from_marked(e: Any) -> YamlError:
    context: str | None = e.context
    problem: str = e.problem or context or "invalid YAML"
    mark = e.problem_mark or e.context_mark
    pos = None if mark is None else _pos(mark)
    if context == "expected a single document in the stream":
        return YamlError("only one document is allowed", pos)
    if problem == "second occurrence" and context and e.context_mark is not None:
        first = e.context_mark.line + 1
        reason = f"{context.replace('; first occurrence', '')} (first at line {first})"
    elif context and context.startswith("while ") and problem != context:
        reason = f"{context}: {problem}"  # says what was being read, e.g. a quoted scalar
    else:
        reason = problem
    return YamlError(" ".join(reason.split()), pos)


def _within(error: YamlError, text: str) -> YamlError:
    """`error` with its position moved back inside `text`: libyaml reports an error at the end
    of a file without a final line break on the line after the last one."""
    if error.pos is None:
        return error
    lines = _OTHER_BREAKS.sub("\n", text.replace("\r\n", "\n")).split("\n")
    if error.pos.line <= len(lines):
        return error
    return YamlError(error.reason, Pos(len(lines), len(lines[-1]) + 1))


def _tag_name(tag: str) -> str:
    return "!!" + tag[len(_Y) :] if tag.startswith(_Y) else tag


def _pos(mark: Any) -> Pos:
    return _new_pos(Pos, (mark.line + 1, mark.column + 1))


_new_pos = tuple.__new__  # skips NamedTuple's Python-level __new__: this runs per node


def _pos_of_index(text: str, index: int) -> Pos:
    line_start = text.rfind("\n", 0, index) + 1
    return Pos(text.count("\n", 0, index) + 1, index - line_start + 1)
