"""Tests for smllm's ECMA-flavoured regex dialect."""

from __future__ import annotations

import re
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smllm.machine.regex import PatternError, compile_pattern, pattern_matches, translate


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("^GH-[0-9]+$", "GH-12", True),
        ("^GH-[0-9]+$", "GH-12\n", False),
        ("^GH-[0-9]+$", "xGH-12", False),
        ("b", "abc", True),  # unanchored search
        ("^b", "abc", False),
        ("^b", "a\nb", False),  # no MULTILINE
        ("a$", "a\nb", False),
        (r"\d", "٣", False),  # Arabic-indic digit
        (r"\d", "3", True),
        (r"\w", "é", False),
        (r"\bx\b", "éxé", True),  # é is not a word character in ASCII mode
        (r"\D", "٣", True),
        ("a.b", "a\nb", False),
        ("a.b", "a\rb", False),
        ("a.b", "a\u2028b", False),
        ("a.b", "a\u2029b", False),
        ("a.b", "a b", True),
        ("a.b", "a\u00e9b", True),
        ("^[.$]+$", ".$.", True),
        ("^[.$]+$", "ab", False),
        (r"^a\$$", "a$", True),
        (r"^a\.b$", "axb", False),
        (r"^a\\.$", "a\\x", True),
        (r"^a\/b$", "a/b", True),
        (r"^\u0041\x42$", "AB", True),
        (r"(?<=a)b", "ab", True),
        (r"(?<!a)b", "ab", False),
        (r"^(?<year>\d{4})-\k<year>$", "2024-2024", True),
        (r"^(?<year>\d{4})-\k<year>$", "2024-2025", False),
        ("^[]$", "", False),  # ECMA: empty class matches nothing
        ("^a[]", "a]", False),
        ("^a[^]b$", "a\nb", True),  # ECMA: [^] matches anything
        ("^[a-c-e]+$", "a-e", True),
        ("^[a-c-e]+$", "d", False),
        ("^[!--]+$", ",", True),  # range ! .. -
        ("^[--/]+$", ".", True),  # range - .. /
        ("^[a-]+$", "a-", True),
        ("^[[a]+$", "[a", True),
        ("^[a&&b|~]+$", "&|~", True),
        (r"^[\]]$", "]", True),
        ("^[^a]$", "\n", True),  # negated classes do match line breaks
        ("^a{2}$", "aa", True),
        ("^a{2,}?$", "aaa", True),
        ("^x{,3}$", "x{,3}", True),  # not a quantifier in ECMA: literal
        ("^x{,3}$", "xx", False),
        ("^{a}$", "{a}", True),
        ("^(?:ab)+(?=c)(?!d)", "ababc", True),
    ],
)
def test_matches(pattern: str, value: str, expected: bool) -> None:
    assert pattern_matches(pattern, value) is expected


def test_named_group_is_usable() -> None:
    match = compile_pattern(r"(?<id>[A-Z]+-\d+)").search("see GH-12 now")
    assert match is not None
    assert match.group("id") == "GH-12"


def test_translation() -> None:
    assert translate("a.$") == "a[^\\n\\r\\u2028\\u2029]\\Z"
    assert translate("[.$]") == "[.$]"
    assert translate(r"\.\$") == r"\.\$"
    assert translate("(?<n>x)\\k<n>") == "(?P<n>x)(?P=n)"
    assert translate("(?<=a)(?<!b)") == "(?<=a)(?<!b)"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(", "missing ), unterminated subpattern at position 0"),
        ("ab[", "unterminated character set at position 2"),
        # The position is in the author's pattern, not in our longer translation.
        ("..(", "missing ), unterminated subpattern at position 2"),
        ("a**", "multiple repeat at position 2"),
        (r"\k<nope>", "unknown group name 'nope' at position 3"),
        ("\\", "bad escape (end of pattern) at position 0"),
        ("a{99999999999}", "the repetition number is too large"),
        ("(" * 5000, "pattern is nested too deeply"),
        # Python-only syntax that ECMA rejects.
        ("(?P<x>a)", "unknown extension ?P at position 1"),
        ("a(?i)", "unknown extension ?i at position 2"),
        ("(?#c)", "unknown extension ?# at position 1"),
        ("(?>a)", "unknown extension ?> at position 1"),
        ("a*+", "multiple repeat at position 2"),
        ("a{2}+", "multiple repeat at position 4"),
        (r"x\Z", r"bad escape \Z at position 1"),
        (r"[\a]", r"bad escape \a at position 1"),
        (r"\N{DIGIT ONE}", r"bad escape \N at position 0"),
    ],
)
def test_bad_pattern(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as info:
        compile_pattern(pattern)
    assert info.value.reason == reason
    assert str(info.value) == reason


def test_compiled_patterns_are_cached() -> None:
    assert compile_pattern("^x+$") is compile_pattern("^x+$")


def _compiles_or_pattern_error(pattern: str) -> None:
    # Python's future-set-syntax FutureWarnings must not escape either.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            assert isinstance(compile_pattern(pattern), re.Pattern)
        except PatternError as exc:
            assert exc.reason


@given(st.text())
def test_any_text_compiles_or_raises_pattern_error(pattern: str) -> None:
    _compiles_or_pattern_error(pattern)


# Mostly metacharacters, so the walker's escape and class paths get exercised hard.
_META = st.text(alphabet="()[]{}\\.^$*+?|<>=!:-&~kPdwbu0a1,", max_size=30)


@given(_META)
def test_metacharacter_soup_compiles_or_raises_pattern_error(pattern: str) -> None:
    _compiles_or_pattern_error(pattern)
