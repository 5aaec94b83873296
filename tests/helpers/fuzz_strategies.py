"""The fuzz inputs of test_fuzz.py: valid machines mutated as data (a) and as bytes (b), and
random YAML shaped more or less like a machine (c)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, cast

import yaml
from helpers.fuzz_property import SEEDS
from hypothesis import assume, note
from hypothesis import strategies as st

from smllm.machine.sources.yamltree import load_yaml

# -- vocabularies ------------------------------------------------------------------------------

KEYS = (
    "id", "description", "initial", "meta", "states", "smllm", "instance", "kind", "ref",
    "param", "pattern", "events", "source", "params", "sharedActions", "position", "entry",
    "exit", "type", "properties", "required", "$defs", "on", "always", "target", "guard",
    "actions", "reenter", "entryPoint", "fallback", "paramDescriptions", "run", "timeoutSecs",
    "cwd", "text", "file", "atLeast", "state", "items", "enum", "const", "$ref", "minimum",
    "format", "<<", "context", "after", "invoke", "tags", "cond", "internal", "*", "a.*",
    "enter", "yield", "resume", "unmatched", "pause", "listPaused", "stateMachine", "note",
    "", " ", "0", "true", "null", "~", "é", "Id", "ON", "a b", "x\ny", "#id", ".child", "a.b",
)  # fmt: skip
WORDS = (
    "A", "B", "PLAN", "WORK", "DONE", "FIX", "START", "final", "prompt", "command", "setRef",
    "visits", "agent", "host", "before", "after", "middle", "object", "string", "array",
    "integer", "number", "boolean", "null", "parallel", "history", "compound", "raise", "and",
    "not", "#id", ".child", "a.b", "enter", "unmatched", "yield", "</smllm>", "</Events>",
    "</instructions>", "<smllm>", "", " ", "x\ny", "a\r\nb", "é", "日本語", "\u2028", "\x85",
    "\t", "%", "@", "&a", "*a", "!", "|", ">", "'", '"', "- x", "a: b", "#", "..", "/", "/tmp",
    ".", "prompts/triage.md", "enter-A.md", "run me", "test -f PLAN.md", "true", "on", "yes",
    "1", "0x1F", "1e400", ".nan", "~", "null",
)  # fmt: skip
PATTERNS = (
    "(", ")", "[", "a{2,1}", "(?P<x>a)", "\\A", "a++", "(?i)x", "\\k<n>", "(?<n>a)\\k<n>",
    "[]", "[^]", "x{99999999999}", "(" * 300 + ")" * 300, "\\", "[z-a]", "(?<=a+)b", "\\p{L}",
    "\\u{1F600}", "\\cA", "\\0", "\\8", "a{,3}", "]", "}", "$^", "\\Z", "[a-\\d]", "(?#c)",
    "a**", "(?<a>x)(?<a>y)", "\\1(a)", "^BUG-[0-9]+$", "[[:alpha:]]", "[&&]", "a{1}+", "\\N",
    "(?=a)*", "x|", "^", "$", "\\b", "[\\b]", "\\x4", "\\u12", "é+", "\n", "(?<", "(?",
)  # fmt: skip
SCHEMA_BITS: tuple[tuple[str, Any], ...] = (
    ("type", "string"), ("type", "integer"), ("type", ["string", "null"]), ("type", "object"),
    ("type", "bogus"), ("type", 3), ("type", []), ("$ref", "#/$defs/nope"),
    ("$ref", "#/$defs/loop"), ("$ref", "#"), ("$ref", "http://example.com/s"),
    ("$ref", "#/properties/a"), ("$ref", "#/$defs/a~1b"), ("$ref", 3), ("enums", ["a"]),
    ("items", {"type": "string"}), ("items", "x"), ("items", False), ("prefixItems", [{}]),
    ("minimum", 1e400), ("minimum", -1), ("minimum", "x"), ("minimum", True),
    ("minimum", float("nan")), ("pattern", "a{2,1}"), ("pattern", 3), ("pattern", "^x$"),
    ("patternProperties", {"(": {}}), ("patternProperties", {"^a": {"type": "string"}}),
    ("const", {"a": [1]}), ("const", None), ("enum", []), ("enum", [1, "a"]), ("enum", "x"),
    ("enum", [None]), ("enum", ["a", "a"]), ("required", ["x"]), ("required", "x"),
    ("$defs", {"loop": {"$ref": "#/$defs/loop"}}), ("$defs", {"a": {"$ref": "#/$defs/b"}}),
    ("not", {}), ("allOf", [{"type": "string"}, {"minLength": 2}]), ("anyOf", []),
    ("oneOf", [True, False]), ("format", "date"), ("format", 1), ("contentSchema", {}),
    ("dependentRequired", {"a": ["b"]}), ("$dynamicRef", "#x"), ("$anchor", "x"),
    ("$id", "http://example.com/x"), ("$id", "urn:x"), ("$schema", "http://json-schema.org/draft-04/schema#"),
    ("unevaluatedProperties", False), ("multipleOf", 0), ("multipleOf", 1e-400),
    ("multipleOf", 0.1), ("maxLength", -1), ("maxLength", 1.5), ("maxLength", "3"),
    ("additionalProperties", {"type": "integer"}), ("propertyNames", {"pattern": "^a"}),
    ("if", {"type": "string"}), ("then", {"minLength": 3}), ("else", False),
    ("description", "</smllm>\nnext line"), ("description", 3), ("title", "t"),
    ("default", [1]), ("examples", "x"), ("properties", {"a": {"type": "integer"}}),
    ("contains", {"const": 1}), ("minContains", 2), ("uniqueItems", True),
)  # fmt: skip

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(WORDS)
    | st.text(max_size=12)
)
_keys = st.sampled_from(KEYS) | st.sampled_from(WORDS) | st.text(max_size=8)
_any = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)
_names = st.sampled_from(WORDS) | st.from_regex(r"\A[A-Za-z0-9_-]{1,8}\Z") | st.text(max_size=8)


# -- strategy a: mutate valid machines as data -------------------------------------------------

Node = Any
Where = tuple[str | int, ...]


@st.composite
def _seed(draw: st.DrawFn) -> tuple[Path, str]:
    path = draw(st.sampled_from(SEEDS))
    return path, path.read_text(encoding="utf-8")


def _seed_data(text: str) -> dict[str, Any]:
    # YAML 1.2 core schema, as smllm reads it: yaml.safe_load would read `on:` as true
    return load_yaml(text).data


def _walk(node: Node, where: Where, out: list[Where]) -> None:
    out.append(where)
    if isinstance(node, dict):
        for key, value in node.items():
            _walk(value, (*where, key), out)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _walk(value, (*where, index), out)


def _get(root: Node, where: Where) -> Node:
    for part in where:
        root = root[part]
    return root


def _set(root: Node, where: Where, value: Node) -> None:
    _get(root, where[:-1])[where[-1]] = value


def _rename(parent: dict[str, Any], old: str, new: str) -> None:
    items = [(new if k == old else k, v) for k, v in parent.items()]
    parent.clear()
    for k, v in items:
        parent.setdefault(k, v)


def _wrap(value: Node, depth: int, kind: str) -> Node:
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def _states(data: Node) -> list[str]:
    states = data.get("states") if isinstance(data, dict) else None
    return [str(s) for s in states] if isinstance(states, dict) else []


def _schema_slot(data: Node, event: str, param: str) -> dict[str, Any] | None:
    """meta.events.EVENT.params.properties.PARAM, made where it can be; None where not."""
    node = data
    for key in ("meta", "events", event, "params", "properties", param):
        if not isinstance(node, dict):
            return None
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    return cast(dict[str, Any], node)


MUTATIONS = (
    "delete", "null", "retype", "rename", "retarget", "unknown", "nest", "shuffle", "huge",
    "unicode", "tag", "pattern", "schema", "copy", "guard", "setref", "event",
)  # fmt: skip


def mutate(draw: st.DrawFn, data: dict[str, Any]) -> None:
    op = draw(st.sampled_from(MUTATIONS))
    places: list[Where] = []
    _walk(data, (), places)
    where = draw(st.sampled_from(places))
    node = _get(data, where)
    states = _states(data)
    note(f"mutation {op} at {where}")
    if op == "delete" and where:
        parent = _get(data, where[:-1])
        del parent[where[-1]]
    elif op == "null" and where:
        _set(data, where, None)
    elif op == "retype" and where:
        _set(data, where, draw(_any))
    elif op == "rename" and where and isinstance(where[-1], str):
        _rename(_get(data, where[:-1]), where[-1], draw(_keys))
    elif op == "retarget":
        strings = [w for w in places if w and isinstance(_get(data, w), str)]
        if strings:
            spot = draw(st.sampled_from(strings))
            choices = st.sampled_from(states) | _names if states else _names
            _set(data, spot, draw(choices))
    elif op == "unknown" and isinstance(node, dict):
        node[draw(_keys)] = draw(_any)
    elif op == "nest" and where:
        depth = draw(st.sampled_from([1, 2, 5, 50, 199, 200, 201, 260]))
        _set(data, where, _wrap(node, depth, draw(st.sampled_from(["list", "dict"]))))
    elif op == "shuffle" and isinstance(node, (dict, list)) and len(node) > 1:
        items = list(node.items()) if isinstance(node, dict) else list(node)
        order = draw(st.permutations(range(len(items))))
        if isinstance(node, dict):
            node.clear()
            node.update(items[i] for i in order)
        else:
            node[:] = [items[i] for i in order]
    elif op == "huge" and where:
        size = draw(st.sampled_from([1_000, 1_000, 100_000, 300_000]))
        _set(data, where, draw(st.sampled_from(["x", "é", "</smllm>", "a\n"])) * size)
    elif op == "unicode" and where:
        _set(data, where, draw(st.text(min_size=1, max_size=30)))
    elif op == "tag":
        texts = [w for w in places if w and w[-1] in ("text", "description", "kind")]
        if texts:
            tag = draw(st.sampled_from(["</smllm>", "</SMLLM>", "</events>", "</instructions>"]))
            _set(data, draw(st.sampled_from(texts)), f"before {tag} after")
    elif op == "pattern":
        pattern = draw(st.sampled_from(PATTERNS) | st.text(max_size=10))
        spots = [w for w in places if w and w[-1] == "pattern"]
        if draw(st.booleans()) and spots:
            _set(data, draw(st.sampled_from(spots)), pattern)
        elif draw(st.booleans()):
            meta = data.setdefault("meta", {})
            if isinstance(meta, dict):
                inst = meta.setdefault("instance", {})
                if isinstance(inst, dict):
                    ref = inst.setdefault("ref", {})
                    if isinstance(ref, dict):
                        ref["pattern"] = pattern
        else:
            slot = _schema_slot(data, draw(_names), draw(_names))
            if slot is not None:
                slot["pattern"] = pattern
    elif op == "schema":
        meta = data.get("meta")
        events = meta.get("events") if isinstance(meta, dict) else None
        known = list(events) if isinstance(events, dict) else []
        event = draw(st.sampled_from(known) | _names if known else _names)
        slot = _schema_slot(data, event, draw(st.sampled_from(["a", "files", "b_2", "ref"])))
        if slot is not None:
            for _ in range(draw(st.integers(1, 4))):
                key, value = draw(st.sampled_from(SCHEMA_BITS))
                slot[key] = copy.deepcopy(value)
        params = _get_params(data, event)
        if params is not None and draw(st.booleans()):
            key, value = draw(st.sampled_from(SCHEMA_BITS))
            params[key] = copy.deepcopy(value)
    elif op == "copy" and where:
        spot = draw(st.sampled_from(places))
        if spot and not _inside(spot, where):
            _set(data, spot, copy.deepcopy(node))
    elif op == "guard" and states:
        state = data["states"][draw(st.sampled_from(states))]
        if isinstance(state, dict):
            kind = draw(st.sampled_from(["visits", "command", "stateIn", "and", "nope", None]))
            params = draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "state": st.sampled_from(states) | _names,
                        "atLeast": _scalars,
                        "run": _scalars | st.lists(_scalars, max_size=3),
                        "timeoutSecs": _scalars,
                        "cwd": st.sampled_from(WORDS),
                        "extra": _scalars,
                    },
                )
            )
            guard: Any = {"type": kind, "params": params} if draw(st.booleans()) else kind
            state.setdefault("on", {})
            if isinstance(state["on"], dict):
                target = draw(st.sampled_from(states) | _names)
                state["on"][draw(_names)] = draw(
                    st.sampled_from(
                        [
                            {"target": target, "guard": guard},
                            [{"target": target, "guard": guard}, target],
                            [target, {"guard": guard}],
                        ]
                    )
                )
    elif op == "setref" and where:
        _set(data, where, draw(st.sampled_from(["setRef", ["setRef"], {"type": "setRef"}])))
    elif op == "event" and states:
        state = data["states"][draw(st.sampled_from(states))]
        if isinstance(state, dict):
            key = draw(st.sampled_from(["on", "always", "entry", "exit", "meta", "type"]))
            state[key] = draw(_any)


def _get_params(data: Node, event: str) -> dict[str, Any] | None:
    try:
        node = data["meta"]["events"][event]["params"]
    except (KeyError, TypeError, IndexError):
        return None
    return node if isinstance(node, dict) else None


def _inside(a: Where, b: Where) -> bool:
    """Whether `a` lies inside (or is) `b`, or `b` inside `a`: copying would change the tree
    being copied."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@st.composite
def mutated_machines(draw: st.DrawFn) -> tuple[Path, str]:
    path, text = draw(_seed())
    data = _seed_data(text)
    for _ in range(draw(st.integers(1, 5))):
        mutate(draw, data)
    try:
        out = yaml.dump(
            data,
            Dumper=_Dumper,
            sort_keys=False,
            allow_unicode=draw(st.booleans()),
            default_flow_style=draw(st.sampled_from([False, None, True])),
            width=draw(st.sampled_from([80, 10**9])),
            explicit_start=draw(st.booleans()),
        )
    except (RecursionError, ValueError):  # a dumper limit, not the loader's
        assume(False)
        raise
    # big, not slow: a file of megabytes takes seconds (more in the pure-Python composer that
    # a file which might nest deeply gets), which is no hang
    assume(len(out) <= 2_000_000)
    if draw(st.booleans()):  # a repeated key, by text
        lines = out.splitlines(keepends=True)
        keyed = [i for i, line in enumerate(lines) if re.match(r"^ *[A-Za-z$][\w$]*:", line)]
        if keyed:
            i = draw(st.sampled_from(keyed))
            lines.insert(i + 1, lines[i])
            out = "".join(lines)
    return path, out


# -- strategy b: mutate valid machines as bytes ------------------------------------------------

SNIPPETS = (
    b"\t", b"&a ", b"*a", b"&a", b" *a", b"<<: *a\n", b"---\n", b"...\n", b"--- ",
    b"%YAML 1.2\n", b"%YAML 1.1\n---\n", b"%TAG !e! tag:e.com,2000:\n", b"\xef\xbb\xbf", b"\x00",
    b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80", b"\r\n", b"\r",
    b"\xc2\x85", b"\xe2\x80\xa8", b"{", b"}", b"[", b"]", b"{a: [1, {b: c}], d: e}", b": ",
    b"- ", b"? ", b"!!str ", b"!!int ", b"!!binary ", b"!!set ", b"!!omap ", b"!foo ", b"! ",
    b"|", b">-", b"|+2", b"'", b'"', b"#", b"\\", b"~", b"null", b"on", b"\xe3\x80\x80",
    b"\xf0\x9f\x98\x80", b"e\xcc\x81", b"   ", b"\x1b", b"\x7f", b"\x0c", b"\x0b",
    b"x: &x [*x]\n", b"a: &b {c: *b}\n", b"0x", b"9" * 5000, b"\"\\ud800\"", b"\"\\x\"",
)  # fmt: skip
TEXT_OPS = (
    "delete-line", "duplicate-line", "swap-lines", "insert-line", "indent", "tab-indent",
    "flip", "truncate", "insert", "alias", "flow", "bom", "crlf", "breaks", "nul", "latin1",
)  # fmt: skip


def _seed_lines() -> list[bytes]:
    return [line for p in SEEDS for line in p.read_bytes().splitlines(keepends=True)]


_ALL_LINES = _seed_lines()


def text_mutate(draw: st.DrawFn, src: bytes) -> bytes:
    op = draw(st.sampled_from(TEXT_OPS))
    note(f"text op {op}")
    lines = src.splitlines(keepends=True) or [b""]
    i = draw(st.integers(0, len(lines) - 1))
    if op == "delete-line":
        del lines[i]
    elif op == "duplicate-line":
        lines.insert(i, lines[i])
    elif op == "swap-lines":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "insert-line":
        line = draw(st.sampled_from(_ALL_LINES) | st.binary(max_size=30).map(lambda b: b + b"\n"))
        lines.insert(i, line)
    elif op == "indent":
        lines[i] = b" " * draw(st.integers(1, 9)) + lines[i]
    elif op == "tab-indent":
        lines[i] = re.sub(rb"^( +)", lambda m: b"\t" * max(1, len(m.group(1)) // 2), lines[i])
    elif op == "alias":
        keyed = [k for k, line in enumerate(lines) if re.match(rb"^ *[\w$-]+: +\S", line)]
        if len(keyed) >= 2:
            a, b = draw(st.sampled_from(keyed)), draw(st.sampled_from(keyed))
            lines[a] = re.sub(rb"^( *[\w$-]+: +)", rb"\1&x ", lines[a], count=1)
            lines[b] = re.sub(rb"^( *[\w$-]+: +).*", rb"\1*x", lines[b], count=1)
    elif op == "flow":
        # a block mapping line's value as a flow mapping of the next lines' keys
        end = min(len(lines), i + draw(st.integers(1, 6)))
        keys = [
            m.group(1)
            for line in lines[i + 1 : end]
            if (m := re.match(rb"^ *([\w$-]+): *(.*?)\s*$", line))
        ]
        flow = b"{" + b", ".join(keys) + b"}"
        lines[i] = re.sub(rb":\s*$", b": " + flow + b"\n", lines[i])
        del lines[i + 1 : end]
    text = b"".join(lines)
    if op == "flip" and text:
        k = draw(st.integers(0, len(text) - 1))
        text = text[:k] + bytes([text[k] ^ draw(st.integers(1, 255))]) + text[k + 1 :]
    elif op == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif op == "insert":
        k = draw(st.integers(0, len(text)))
        text = text[:k] + draw(st.sampled_from(SNIPPETS)) + text[k:]
    elif op == "bom":
        k = draw(st.sampled_from([0, 0, len(text) // 2]))
        text = text[:k] + b"\xef\xbb\xbf" + text[k:]
    elif op == "crlf":
        text = text.replace(b"\n", b"\r\n")
    elif op == "breaks":
        text = text.replace(b"\n", draw(st.sampled_from([b"\r", b"\xc2\x85", b"\xe2\x80\xa8"])))
    elif op == "nul":
        k = draw(st.integers(0, len(text)))
        text = text[:k] + b"\x00" + text[k:]
    elif op == "latin1":
        text = text.decode("utf-8", "replace").encode("latin-1", "replace") + "é".encode("latin-1")
    return text


@st.composite
def mutated_texts(draw: st.DrawFn) -> tuple[Path, bytes]:
    path = draw(st.sampled_from(SEEDS))
    src = path.read_bytes()
    for _ in range(draw(st.integers(1, 4))):
        src = text_mutate(draw, src)
    return path, src


# -- strategy c: random YAML -------------------------------------------------------------------


def _actions(names: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    action = st.sampled_from(["setRef", "prompt", "raise"]) | st.fixed_dictionaries(
        {"type": st.sampled_from(["prompt", "command", "setRef", "log", "x"]) | _scalars},
        optional={
            "params": st.fixed_dictionaries(
                {},
                optional={
                    "text": st.sampled_from(WORDS) | _scalars,
                    "file": st.sampled_from(["prompts/triage.md", "nope.md", "", ".", "/"]),
                    "run": st.sampled_from(["true", ""]) | st.lists(_scalars, max_size=2),
                    "timeoutSecs": _scalars,
                    "cwd": st.sampled_from([".", "..", "nope", ""]),
                },
            )
            | _any
        },
    )
    return action | st.lists(action, max_size=3) | _any


@st.composite
def random_machines(draw: st.DrawFn) -> str:
    """Random data, more or less shaped like a machine, dumped by yaml.safe_dump."""
    if draw(st.integers(0, 4)) == 0:  # anything at all
        data: Any = draw(_any)
    else:
        names = draw(st.lists(st.sampled_from(WORDS[:7]) | _names, min_size=1, max_size=6))
        name = st.sampled_from(names)
        transition = (
            name
            | st.fixed_dictionaries(
                {},
                optional={
                    "target": name | _scalars,
                    "guard": st.fixed_dictionaries(
                        {"type": st.sampled_from(["visits", "command", "or"])},
                        optional={"params": _any},
                    )
                    | _any,
                    "actions": _actions(name),
                    "reenter": _scalars,
                    "description": _scalars,
                },
            )
            | _any
        )
        transitions = transition | st.lists(transition, max_size=3)
        state = st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["final", "parallel", "x"]) | _scalars,
                "entry": _actions(name),
                "exit": _actions(name),
                "on": st.dictionaries(st.sampled_from(WORDS) | _keys, transitions, max_size=3),
                "always": transitions,
                "meta": st.fixed_dictionaries(
                    {},
                    optional={
                        "entryPoint": _scalars,
                        "fallback": _scalars,
                        "paramDescriptions": _any,
                    },
                ),
                "description": _scalars,
            },
        )
        meta = st.fixed_dictionaries(
            {"smllm": st.sampled_from([1, 1, 1, 2, "1", True, 1.0])},
            optional={
                "instance": _any,
                "events": st.dictionaries(
                    _keys,
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "description": _scalars,
                            "source": st.sampled_from(["agent", "host", "x"]),
                            "params": st.fixed_dictionaries(
                                {},
                                optional={
                                    "type": st.sampled_from(["object", "string"]),
                                    "properties": st.dictionaries(
                                        _keys,
                                        st.lists(st.sampled_from(SCHEMA_BITS), max_size=3).map(
                                            lambda bits: copy.deepcopy(dict(bits))
                                        ),
                                        max_size=3,
                                    ),
                                    "required": st.lists(_keys, max_size=2),
                                },
                            ),
                        },
                    ),
                    max_size=3,
                ),
                "sharedActions": st.lists(
                    st.fixed_dictionaries(
                        {"states": st.lists(name, max_size=3)},
                        optional={
                            "entry": _actions(name),
                            "exit": _actions(name),
                            "position": st.sampled_from(["before", "after", "x"]),
                        },
                    ),
                    max_size=2,
                ),
            },
        )
        data = draw(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["m", "a-b_1", "", "a b"]) | _scalars,
                    "initial": name | _scalars,
                    "meta": meta | _any,
                    "states": st.dictionaries(name, state | _any, max_size=6),
                },
                optional={"description": _scalars},
            )
        )
        extra = draw(_keys)
        if extra not in data:
            data[extra] = draw(_any)
    try:
        return yaml.dump(
            data,
            Dumper=_Dumper,
            sort_keys=False,
            allow_unicode=draw(st.booleans()),
            default_flow_style=draw(st.sampled_from([False, None, True])),
        )
    except (RecursionError, ValueError):
        assume(False)
        raise
