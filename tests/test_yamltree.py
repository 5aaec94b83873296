"""Tests for smllm.machine.sources.yamltree: YAML 1.2 core loading with positions."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smllm.machine.sources import yamltree
from smllm.machine.sources.yamltree import Duplicate, Pos, YamlDoc, YamlError, load_yaml

Loader = Callable[[str], YamlDoc]


def _with(pure: bool) -> Loader:
    return lambda text: yamltree._load(text, yamltree._loader(pure))


# Both composers (libyaml's and PyYAML's own) must give the same data and positions.
@pytest.fixture(params=[False, True], ids=["c", "pure"])
def load(request: pytest.FixtureRequest) -> Loader:
    return _with(request.param)


def _err(source: bytes | str, load: Callable[[str], YamlDoc] | None = None) -> YamlError:
    with pytest.raises(YamlError) as info:
        if load is None or isinstance(source, bytes):
            load_yaml(source)
        else:
            load(source)
    return info.value


MACHINE = """\
name: demo
states:
  PLAN:
    prompt: "Write a plan"
    on:
      planned:
        - target: BUILD
          when: { tests: 1, note: x }
  BUILD:
    text: |
      line one
      line two
    folded: >
      a
      b
    plain: first
      second
end: true
"""


# --- positions ---------------------------------------------------------------


def test_nested_positions(load: Loader) -> None:
    doc = load(MACHINE)
    assert doc.value_pos[()] == Pos(1, 1)
    assert doc.key_pos[("name",)] == Pos(1, 1)
    assert doc.value_pos[("name",)] == Pos(1, 7)
    assert doc.key_pos[("states",)] == Pos(2, 1)
    assert doc.value_pos[("states",)] == Pos(3, 3)  # a block mapping starts at its first key
    assert doc.key_pos[("states", "PLAN", "prompt")] == Pos(4, 5)
    assert doc.value_pos[("states", "PLAN", "prompt")] == Pos(4, 13)
    planned = ("states", "PLAN", "on", "planned")
    assert doc.key_pos[planned] == Pos(6, 7)
    assert doc.value_pos[planned] == Pos(7, 9)
    assert doc.value_pos[(*planned, 0)] == Pos(7, 11)
    assert doc.key_pos[(*planned, 0, "target")] == Pos(7, 11)
    assert doc.value_pos[(*planned, 0, "target")] == Pos(7, 19)
    assert doc.key_pos[("end",)] == Pos(18, 1)
    assert doc.value_pos[("end",)] == Pos(18, 6)
    assert set(doc.key_pos) <= set(doc.value_pos)


def test_flow_mapping_positions(load: Loader) -> None:
    doc = load(MACHINE)
    when = ("states", "PLAN", "on", "planned", 0, "when")
    assert doc.value_pos[when] == Pos(8, 17)
    assert doc.key_pos[(*when, "tests")] == Pos(8, 19)
    assert doc.value_pos[(*when, "tests")] == Pos(8, 26)
    assert doc.key_pos[(*when, "note")] == Pos(8, 29)
    assert doc.value_pos[(*when, "note")] == Pos(8, 35)
    assert doc.data["states"]["PLAN"]["on"]["planned"][0]["when"] == {"tests": 1, "note": "x"}


def test_list_positions(load: Loader) -> None:
    doc = load("a:\n- x\n-   y\n- [p, q]\n")
    assert doc.data == {"a": ["x", "y", ["p", "q"]]}
    assert doc.value_pos[("a",)] == Pos(2, 1)
    assert doc.value_pos[("a", 0)] == Pos(2, 3)
    assert doc.value_pos[("a", 1)] == Pos(3, 5)
    assert doc.value_pos[("a", 2)] == Pos(4, 3)
    assert doc.value_pos[("a", 2, 1)] == Pos(4, 7)


def test_multiline_strings(load: Loader) -> None:
    doc = load(MACHINE)
    build = doc.data["states"]["BUILD"]
    assert build == {"text": "line one\nline two\n", "folded": "a b\n", "plain": "first second"}
    assert doc.value_pos[("states", "BUILD", "text")] == Pos(10, 11)
    assert doc.value_pos[("states", "BUILD", "folded")] == Pos(13, 13)
    assert doc.value_pos[("states", "BUILD", "plain")] == Pos(16, 12)
    assert doc.key_pos[("states", "BUILD", "plain")] == Pos(16, 5)


def test_columns_count_characters(load: Loader) -> None:
    doc = load("é€😀: ünï\nb: 'ß'\n")
    assert doc.value_pos[("é€😀",)] == Pos(1, 6)
    assert doc.value_pos[("b",)] == Pos(2, 4)


def test_empty_value_position(load: Loader) -> None:
    doc = load("a:\nb: 1\n")
    assert doc.data == {"a": None, "b": 1}
    assert doc.value_pos[("a",)] == Pos(1, 3)  # just after the colon


# --- YAML 1.2 core scalars -----------------------------------------------------


def test_on_is_a_string_key(load: Loader) -> None:
    doc = load("on: 1\nyes: no\noff: y\nn: Yes\ntrue: 2\n1: a\n~: b\n")
    assert doc.data == {"on": 1, "yes": "no", "off": "y", "n": "Yes", "true": 2, "1": "a", "~": "b"}
    assert all(type(k) is str for k in doc.data)
    assert doc.key_pos[("on",)] == Pos(1, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("On", "On"),
        ("y", "y"),
        ("0o17", 15),
        ("0x1F", 31),
        ("0777", 777),
        ("-12", -12),
        ("+3", 3),
        ("1_000", "1_000"),
        ("1:30", "1:30"),
        ("2001-12-14", "2001-12-14"),
        ("0b101", "0b101"),
        ("1.5", 1.5),
        ("1.", 1.0),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("-2.5E-1", -0.25),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("+.INF", math.inf),
        ("~", None),
        ("null", None),
        ("NULL", None),
        ("nULL", "nULL"),
        ("", None),
        ("true", True),
        ("FALSE", False),
        ("tRUE", "tRUE"),
        ("'true'", "true"),
        ('"12"', "12"),
        ("''", ""),
        ("|\n  12\n", "12\n"),
        ("<<", "<<"),
        ("=", "="),
    ],
)
def test_plain_scalars(load: Loader, text: str, expected: object) -> None:
    value = load(f"v: {text}\n").data["v"]
    assert value == expected
    assert type(value) is type(expected)


def test_nan(load: Loader) -> None:
    for text in (".nan", ".NaN", ".NAN"):
        value = load(f"v: {text}").data["v"]
        assert isinstance(value, float) and math.isnan(value)
    assert load("v: -.nan").data["v"] == "-.nan"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!!str 12", "12"),
        ("!!str", ""),
        ("!!int '12'", 12),
        ("!!int 0x10", 16),
        ("!!float 3", 3.0),
        ("!!float .inf", math.inf),
        ("!!bool 'true'", True),
        ("!!null ''", None),
        ("! 12", 12),  # PyYAML and libyaml report "!" on a plain scalar as untagged
        ("! [1]", [1]),
        ("!!map {a: 1}", {"a": 1}),
        ("!!seq [1]", [1]),
        ("!<tag:yaml.org,2002:int> 7", 7),
    ],
)
def test_explicit_tags(load: Loader, text: str, expected: object) -> None:
    value = load(f"v: {text}\n").data["v"]
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("!foo x", "unknown tag !foo"),
        ("!!binary aGk=", "unknown tag !!binary"),
        ("!!set {a}", "unknown tag !!set"),
        ("!!omap [a: 1]", "unknown tag !!omap"),
        ("!!timestamp 2001-12-14", "unknown tag !!timestamp"),
        ("!!int x", "'x' does not fit the tag !!int"),
        ("!!bool yes", "'yes' does not fit the tag !!bool"),
        ("!!null 0", "'0' does not fit the tag !!null"),
        ("!!float x", "'x' does not fit the tag !!float"),
        ("!!map x", "a scalar does not fit the tag !!map"),
        ("!!seq {a: 1}", "a mapping does not fit the tag !!seq"),
        ("!!str [1]", "a sequence does not fit the tag !!str"),
    ],
)
def test_bad_tags(load: Loader, text: str, reason: str) -> None:
    err = _err(f"a: 1\nv: {text}\n", load)
    assert err.reason == reason
    assert err.pos == Pos(2, 4)


def test_tagged_key(load: Loader) -> None:
    assert load("!!int 1: a\n!!str b: c\n").data == {"1": "a", "b": "c"}
    err = _err("a: 1\n!!int x: 2\n", load)
    assert (err.reason, err.pos) == ("'x' does not fit the tag !!int", Pos(2, 1))


def test_huge_integer(load: Loader) -> None:
    err = _err("a: " + "9" * 5000, load)
    assert (err.reason, err.pos) == ("the integer is too long", Pos(1, 4))
    assert load("a: 0x" + "f" * 5000).data["a"] == 16**5000 - 1


# --- keys ----------------------------------------------------------------------


def test_duplicates(load: Loader) -> None:
    doc = load("a: 1\nb:\n  x: 1\n  y: 2\n  x: 3\na: 4\nb: 5\n")
    assert doc.data == {"a": 1, "b": {"x": 1, "y": 2}}
    assert doc.duplicates == [
        Duplicate(("b", "x"), Pos(5, 3), 3),
        Duplicate(("a",), Pos(6, 1), 1),
        Duplicate(("b",), Pos(7, 1), 2),
    ]
    # the kept (first) value's positions are not overwritten by the repeated one
    assert doc.key_pos[("a",)] == Pos(1, 1)
    assert doc.value_pos[("a",)] == Pos(1, 4)
    assert doc.value_pos[("b",)] == Pos(3, 3)


def test_duplicates_compare_key_text(load: Loader) -> None:
    doc = load("'on': 1\non: 2\n1: a\n'1': b\n01: c\n")
    assert doc.data == {"on": 1, "1": "a", "01": "c"}
    assert [d.path for d in doc.duplicates] == [("on",), ("1",)]


def test_duplicates_in_flow_mapping(load: Loader) -> None:
    doc = load("a: {k: 1, k: 2}\n")
    assert doc.data == {"a": {"k": 1}}
    assert doc.duplicates == [Duplicate(("a", "k"), Pos(1, 11), 1)]


def test_merge_key_is_kept(load: Loader) -> None:
    doc = load("base: &b {x: 1}\nthing:\n  <<: *b\n  y: 2\n")
    assert doc.data["thing"] == {"<<": {"x": 1}, "y": 2}
    assert doc.key_pos[("thing", "<<")] == Pos(3, 3)


@pytest.mark.parametrize("text", ["[a]: 1\n", "{a: 1}: 2\n", "? - a\n: 1\n", "x: 1\n? [a]\n"])
def test_collection_key(load: Loader, text: str) -> None:
    assert _err(text, load).reason == "a mapping key must be a plain scalar"


def test_alias_as_key(load: Loader) -> None:
    assert load("a: &k key\n*k : 2\n").data == {"a": "key", "key": 2}
    err = _err("a: &k [1]\n*k : 2\n", load)
    assert err.reason == "a mapping key must be a plain scalar"


# --- aliases ---------------------------------------------------------------------


def test_alias_copy(load: Loader) -> None:
    doc = load("base: &b\n  x: 1\n  l: [1, 2]\nc1: *b\nc2: *b\n")
    assert doc.data["c1"] == doc.data["c2"] == doc.data["base"] == {"x": 1, "l": [1, 2]}
    assert doc.data["c1"] is not doc.data["base"]
    assert doc.data["c1"]["l"] is not doc.data["c2"]["l"]
    # paths under an alias point at the anchored nodes
    assert doc.value_pos[("c1", "x")] == doc.value_pos[("base", "x")] == Pos(2, 6)
    assert doc.key_pos[("c2", "l")] == Pos(3, 3)
    assert doc.key_pos[("c1",)] == Pos(4, 1)


def test_alias_copy_does_not_repeat_duplicates(load: Loader) -> None:
    doc = load("a: &m {k: 1, k: 2}\nb: *m\n")
    assert doc.data == {"a": {"k": 1}, "b": {"k": 1}}
    assert doc.duplicates == [Duplicate(("a", "k"), Pos(1, 14), 1)]


def test_alias_bomb(load: Loader) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    start = time.perf_counter()
    err = _err("\n".join(lines), load)
    assert err.reason == "the document expands to too many nodes (aliases?)"
    assert err.pos is not None
    assert time.perf_counter() - start < 10


def test_alias_bomb_of_duplicate_keys(load: Loader) -> None:
    dup_map = "m: &m {" + ", ".join(["k: 1"] * 2000) + "}\n"
    copies = "".join(f"c{i}: *m\n" for i in range(100))
    assert _err(dup_map + copies, load).reason.startswith("the document expands")


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: {c: *a}}\n", "a: &a [1, [2, *a]]"])
def test_recursive_alias(load: Loader, text: str) -> None:
    err = _err(text, load)
    assert err.reason.startswith("recursive alias")
    assert err.pos is not None


def test_undefined_alias(load: Loader) -> None:
    err = _err("a: 1\nb: *nope\n", load)
    assert err.reason.startswith("found undefined alias")
    assert err.pos == Pos(2, 4)


# --- document shape --------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "   "])
def test_empty_file(load: Loader, text: str) -> None:
    err = _err(text, load)
    assert (err.reason, err.pos) == ("the file is empty; a machine file is one mapping", Pos(1, 1))


def test_several_documents(load: Loader) -> None:
    err = _err("a: 1\n---\nb: 2\n", load)
    assert (err.reason, err.pos) == ("only one document is allowed", Pos(2, 1))
    err = _err("---\na: 1\n...\n---\nb: 2\n", load)
    assert (err.reason, err.pos) == ("only one document is allowed", Pos(4, 1))


def test_explicit_document_markers(load: Loader) -> None:
    assert load("%YAML 1.1\n---\na: 1\n...\n").data == {"a": 1}


@pytest.mark.parametrize(
    ("text", "pos"), [("- a\n", Pos(1, 1)), ("hello", Pos(1, 1)), ("\n\n  [1]", Pos(3, 3))]
)
def test_top_level_not_a_mapping(load: Loader, text: str, pos: Pos) -> None:
    err = _err(text, load)
    assert (err.reason, err.pos) == ("the top level must be a mapping", pos)


def test_syntax_error(load: Loader) -> None:
    err = _err("a: 1\nb: c: d\n", load)
    assert err.reason.startswith("mapping values are not allowed")
    assert err.pos == Pos(2, 5)
    err = _err("a: 'open\n", load)
    assert err.reason == "while scanning a quoted scalar: found unexpected end of stream"
    assert "line" not in err.reason and "<unicode string>" not in err.reason


def test_error_str_and_args() -> None:
    err = YamlError("boom", Pos(3, 4))
    assert (err.reason, err.pos, err.args) == ("boom", Pos(3, 4), ("boom", Pos(3, 4)))
    assert str(err) == "line 3, column 4: boom"
    assert str(YamlError("boom", None)) == "boom"


def test_duplicate_anchor(load: Loader) -> None:
    err = _err("a: &x 1\nb: &x 2\n", load)
    assert err.reason.endswith("(first at line 1)")
    assert err.pos == Pos(2, 4)


# --- encoding --------------------------------------------------------------------


def test_non_utf8_bytes() -> None:
    err = _err(b"a: 1\nb: caf\xe9\n")
    assert err.reason.startswith("not UTF-8: ")
    assert err.pos == Pos(2, 7)
    assert _err(b"\xff\xfea\x00:\x00").reason.startswith("not UTF-8")  # UTF-16


def test_bytes_and_bom() -> None:
    assert load_yaml(b"a: \xc3\xa9\n").data == {"a": "é"}
    doc = load_yaml(b"\xef\xbb\xbfa: 1\n")
    assert doc.data == {"a": 1}
    assert doc.value_pos[("a",)] == Pos(1, 4)
    assert load_yaml("\ufeffa: 1").data == {"a": 1}


def test_a_bom_shifts_no_column() -> None:
    # issue 8 (10): a byte order mark is accepted (YAML 1.2 §5.2) and is no character of the
    # document: positions are those of the same file without it (the not-UTF-8 position was
    # 3 columns short, the BOM's 3 bytes)
    bom = b"\xef\xbb\xbf"
    for body, pos in (
        (b"id: a\xff\n", Pos(1, 6)),
        (b"id: a\nb: caf\xe9\n", Pos(2, 7)),
        (b"id: a\x01\n", Pos(1, 6)),
        (b'{id: "a", x: [,\n', Pos(1, 15)),
    ):
        assert _err(bom + body).pos == _err(body).pos == pos, body
    doc = load_yaml(bom + b"id: a b c\nx: [1, 2]\n")
    assert (doc.value_pos[("id",)], doc.key_pos[("x",)]) == (Pos(1, 5), Pos(2, 1))


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\ud800", "\ufffe"])
def test_control_characters(char: str) -> None:
    err = _err(f"a: 1\nb: x{char}\n")
    assert err.reason == f"character U+{ord(char):04X} is not allowed"
    assert err.pos == Pos(2, 5)


def test_crlf(load: Loader) -> None:
    doc = load("a: 1\r\nb:\r\n  c: x\r\n")
    assert doc.data == {"a": 1, "b": {"c": "x"}}
    assert doc.value_pos[("b", "c")] == Pos(3, 6)


# --- depth -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 300 + "]" * 300,
        "a: " + "[" * 100_000 + "]" * 100_000,
        "a: " + "{a: " * 50_000 + "}" * 50_000,
        "".join(" " * i + "-\n" for i in range(3000)),
        "".join(" " * i + "k:\n" for i in range(3000)),
        "- " * 50_000 + "x",
        "? " * 50_000 + "x",
    ],
    ids=["flow-300", "flow-100k", "flow-map-50k", "block-seq", "block-map", "compact", "keys"],
)
def test_deep_nesting(text: str) -> None:
    # libyaml's composer recurses in C: this must fail cleanly, never crash the process
    assert _err(text).reason == "the document is nested too deeply"


def test_deep_but_fine(load: Loader) -> None:
    text = "a: " + "[" * 150 + "1" + "]" * 150
    value = load(text).data["a"]
    for _ in range(150):
        value = value[0]
    assert value == 1


# --- module behaviour ----------------------------------------------------------------


def test_yaml_imported_lazily() -> None:
    code = (
        "import sys, smllm.machine; before = 'yaml' in sys.modules\n"
        "import smllm.machine.sources.yamltree\n"
        "assert before or 'yaml' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_uses_c_loader_and_is_fast() -> None:
    import yaml

    assert getattr(yaml, "__with_libyaml__", False), (
        "PyYAML here was built without libyaml: pip install --force-reinstall PyYAML (a wheel)"
    )
    assert issubclass(yamltree._loader(False), yaml.CSafeLoader)
    lines = ["name: demo", "states:"]
    i = 0
    while len(lines) < 200:
        lines += [
            f"  S{i}:",
            f'    prompt: "Do step {i} and report back"',
            "    tools: [read, write]",
            "    on:",
            f"      done: {{ target: S{i + 1}, when: ok }}",
            "      failed:",
            "        - target: FAIL",
        ]
        i += 1
    text = "\n".join(lines)
    best = min(_timed(load_yaml, text) for _ in range(10))
    assert best < 0.025  # ~2 ms on a slow machine; generous against CI noise


def _timed(fn: Callable[[str], object], arg: str) -> float:
    start = time.perf_counter()
    fn(arg)
    return time.perf_counter() - start


# --- fuzz: nothing but YamlError, ever --------------------------------------------------

_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
_YAMLISH = st.text(alphabet=" \n\t-:?,[]{}&*!|>'\"#%@`~.=<abcxy019\\\r\ufeff\x85é", max_size=80)


def _check(load: Callable[[Any], YamlDoc], source: bytes | str) -> None:
    try:
        doc = load(source)
    except YamlError as err:
        assert isinstance(err.reason, str) and err.reason
        assert err.pos is None or (err.pos.line >= 1 and err.pos.col >= 1)
        return
    assert isinstance(doc.data, dict)
    assert () in doc.value_pos
    assert set(doc.key_pos) <= set(doc.value_pos)


@_FUZZ
@given(st.text(max_size=200))
def test_fuzz_text(source: str) -> None:
    _check(load_yaml, source)


@_FUZZ
@given(st.binary(max_size=200))
def test_fuzz_bytes(source: bytes) -> None:
    _check(load_yaml, source)


@_FUZZ
@given(_YAMLISH, st.booleans())
def test_fuzz_yamlish(source: str, pure: bool) -> None:
    _check(_with(pure), source)


@_FUZZ
@given(st.data())
def test_fuzz_mutations(data: st.DataObject) -> None:
    text = MACHINE + "anchor: &x {k: [1, 2]}\ncopy: *x\n"
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "repeat"]))
        if op == "insert":
            text = text[:i] + data.draw(_YAMLISH.filter(bool)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + data.draw(st.integers(1, 20)) :]
        else:
            j = data.draw(st.integers(i, min(len(text), i + 40)))
            text = text[:j] + text[i:j] * data.draw(st.integers(2, 5)) + text[j:]
    _check(load_yaml, text)
    _check(_with(True), text)
