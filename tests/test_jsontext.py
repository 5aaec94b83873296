"""smllm.jsontext gives exactly what the json module gives: the same text, values and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import smllm
from smllm.jsontext import dumps, loads

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec="utf-8") | st.sampled_from('\x00\n"\\\u2028\ud7ff')),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True, database=None)
@given(values)
def test_dumps_is_json_dumps(value: Any) -> None:
    compact = {"ensure_ascii": False, "separators": (",", ":"), "allow_nan": False}
    try:
        expected = json.dumps(value, **compact)  # type: ignore[arg-type]
    except ValueError as exc:  # a non-finite number: refused alike
        with pytest.raises(ValueError, match="not JSON compliant"):
            dumps(value)
        assert "not JSON compliant" in str(exc)
        return
    assert dumps(value) == expected
    assert dumps(value, (", ", ": ")) == json.dumps(value, ensure_ascii=False, allow_nan=False)


@settings(max_examples=300, derandomize=True, database=None)
@given(values, st.sampled_from(["", " ", "\n", "\t\r\n "]))
def test_loads_is_json_loads(value: Any, space: str) -> None:
    text = space + json.dumps(value, indent=1 if space else None) + space
    assert repr(loads(text)) == repr(json.loads(text))


@settings(max_examples=300, derandomize=True, database=None)
@given(st.text(alphabet='{}[]",:0123456789.eE+-truefalsn \n\\x\x01', max_size=30))
def test_loads_fails_as_json_loads(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except ValueError as exc:
        with pytest.raises(ValueError) as got:
            loads(text)
        assert str(got.value) == str(exc)
    else:
        assert repr(loads(text)) == repr(expected)


def test_dumps_refuses_what_json_refuses() -> None:
    for value in (object(), {(1,): 2}, {1j: 2}):
        with pytest.raises(TypeError):
            dumps(value)


def test_errors_in_a_process_that_never_imported_json() -> None:
    # the C scanner finds JSONDecodeError only in an imported json.decoder: the fallback
    # must still raise the same error, and json must stay unimported until then
    code = (
        "import sys\n"
        "from smllm.jsontext import dumps, loads\n"
        "assert loads(' [1, {\"a\": null}] ') == [1, {'a': None}] and dumps({'a': 'é'}) == "
        '\'{"a":"é"}\'\n'
        "assert 'json' not in sys.modules and 're' not in sys.modules, 'imported json or re'\n"
        "for bad in ('{\"id\": \"x\", ', '[1,', '', '[1] x'):\n"
        "    try:\n"
        "        loads(bad)\n"
        "    except ValueError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    # -S: no site, whose .pth files may import re; smllm found through PYTHONPATH instead
    src = str(Path(smllm.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": src}
    ran = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "JSONDecodeError Expecting property name enclosed in double quotes: line 1 column 13 "
        "(char 12)",
        "JSONDecodeError Expecting value: line 1 column 4 (char 3)",
        "JSONDecodeError Expecting value: line 1 column 1 (char 0)",
        "JSONDecodeError Extra data: line 1 column 5 (char 4)",
    ]
