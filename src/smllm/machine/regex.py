"""smllm's regex dialect: ECMA-262 pattern syntax, run as an unanchored Python `re` search.

Patterns come from JSON-Schema-style `pattern` fields, so authors write them the way
JavaScript reads them.  We translate the few constructs whose meaning differs in Python
and let Python's compiler reject everything else.
"""

from __future__ import annotations

import functools
import re

__all__ = ["PatternError", "compile_pattern", "pattern_matches", "translate"]

# ECMA's `.` excludes all four line terminators; Python's excludes only "\n".
_DOT = "[^\\n\\r\\u2028\\u2029]"
# ECMA `$` (no multiline flag) is the very end; Python's `$` also matches before a final "\n".
_END = "\\Z"
# ECMA `[]` matches nothing and `[^]` matches anything; Python would read the `]` as a literal.
_EMPTY_CLASS = "(?!)"
_ANY_CLASS = "[\\s\\S]"
# Literal in both dialects, but Python warns (FutureWarning: future set syntax) about
# `[` and doubled `&~|` inside a class; escaping them keeps the meaning and silences that.
_CLASS_ESCAPED = "[&~|"
# The only brace quantifiers ECMA knows; any other `{` is a literal there (Annex B), while
# Python would also read `{,n}` as a quantifier.
_BRACE_QUANTIFIER = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
# Escapes Python gives a meaning ECMA lacks (bell, \A/\Z anchors, \N{name}, \U0001F600);
# ECMA reads them as the bare letter or rejects them, so we reject them too.
_PYTHON_ONLY_ESCAPES = "aAZNU"
# What may follow `(?` in ECMA: non-capturing, lookahead, lookbehind or a group name.
_GROUP_KINDS = (":", "=", "!", "<")


class PatternError(Exception):
    """A pattern Python cannot compile; `reason` is the compiler's message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Out:
    """Translated text plus, per output character, the source index it came from.

    The map lets compile errors report positions in the pattern the author wrote.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.origin: list[int] = []

    def emit(self, text: str, src: int) -> None:
        self.parts.append(text)
        self.origin.extend([src] * len(text))

    def text(self) -> str:
        return "".join(self.parts)


def _translate(pattern: str) -> _Out:
    out = _Out()
    n = len(pattern)
    i = 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\k<", i) and (end := pattern.find(">", i + 3)) != -1:
                out.emit("(?P=", i)
                for j in range(i + 3, end):
                    out.emit(pattern[j], j)
                out.emit(")", end)
                i = end + 1
            else:
                # Any other escape means the same in Python (or Python rejects it).
                out.emit(_escape(pattern, i), i)
                i += 2
        elif c == "[":
            i = _translate_class(pattern, i, out)
        elif c == ".":
            out.emit(_DOT, i)
            i += 1
        elif c == "$":
            out.emit(_END, i)
            i += 1
        elif c == "(" and pattern.startswith("?", i + 1):
            i = _group_opening(pattern, i, out)
        elif c == "{" and (quant := _BRACE_QUANTIFIER.match(pattern, i)):
            out.emit(quant.group(), i)
            i = quant.end()
            _reject_possessive(pattern, i)
        elif c == "{":
            out.emit("\\{", i)
            i += 1
        elif c in "*+?":
            out.emit(c, i)
            i += 1
            _reject_possessive(pattern, i)
        else:
            out.emit(c, i)
            i += 1
    return out


def _group_opening(pattern: str, i: int, out: _Out) -> int:
    """Copy the `(?` group opening at `i`; reject Python-only kinds ECMA has no meaning for."""
    kind = pattern[i + 2 : i + 3]
    if kind == "<" and pattern[i + 3 : i + 4] not in ("=", "!"):
        # Named group; lookbehinds `(?<=` and `(?<!` are spelled the same in both.
        out.emit("(?P<", i)
        return i + 3
    if kind and kind not in _GROUP_KINDS:
        # e.g. (?P<x>…), (?i), (?#…), (?>…), (?(1)…): valid Python, a syntax error in ECMA.
        raise PatternError(f"unknown extension ?{kind} at position {i + 1}")
    out.emit("(?", i)
    return i + 2


def _escape(pattern: str, i: int) -> str:
    """The two-character escape at `i`, unless Python would read it differently from ECMA."""
    if pattern[i + 1 : i + 2] and pattern[i + 1] in _PYTHON_ONLY_ESCAPES:
        raise PatternError(f"bad escape {pattern[i : i + 2]} at position {i}")
    return pattern[i : i + 2]


def _reject_possessive(pattern: str, i: int) -> None:
    """Python 3.11+ reads a `+` after a quantifier as possessive; ECMA rejects it."""
    if pattern.startswith("+", i):
        raise PatternError(f"multiple repeat at position {i}")


def _translate_class(pattern: str, start: int, out: _Out) -> int:
    """Copy the class opening at `start` (ECMA reading); return the index after it."""
    n = len(pattern)
    i = start + 1
    negated = pattern.startswith("^", i)
    if negated:
        i += 1
    if pattern.startswith("]", i):
        out.emit(_ANY_CLASS if negated else _EMPTY_CLASS, start)
        return i + 1
    out.emit(pattern[start:i], start)
    # Both dialects read `X-Y` as a range when an atom is followed by `-` and a non-`]`;
    # every other `-` is a literal and gets escaped so Python never sees a bare `--`.
    can_range = False
    while i < n:
        c = pattern[i]
        if c == "]":
            out.emit(c, i)
            return i + 1
        if c == "-" and can_range and i + 1 < n and pattern[i + 1] != "]":
            out.emit(c, i)
            can_range = False
            i += 1
            i = _class_atom(pattern, i, out)
            continue
        i = _class_atom(pattern, i, out)
        can_range = True
    # Unterminated: Python reports it ("unterminated character set").
    return i


def _class_atom(pattern: str, i: int, out: _Out) -> int:
    """Copy one class atom at `i` (an escape's first two characters count as one)."""
    if i >= len(pattern):
        return i
    c = pattern[i]
    if c == "\\":
        out.emit(_escape(pattern, i), i)
        return i + 2
    out.emit("\\" + c if c in _CLASS_ESCAPED or c == "-" else c, i)
    return i + 1


def translate(pattern: str) -> str:
    """The Python `re` source for an smllm pattern (compile with `re.ASCII`).

    Raises PatternError for Python-only syntax; other errors surface only when compiling.
    """
    return _translate(pattern).text()


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile an smllm pattern; raise PatternError if it is not valid."""
    out = _translate(pattern)
    try:
        # ASCII: ECMA's \d \w \b are ASCII-only (Python's default is Unicode).
        return re.compile(out.text(), re.ASCII)
    except re.error as exc:
        if exc.pos is None:
            raise PatternError(exc.msg) from None
        pos = out.origin[exc.pos] if exc.pos < len(out.origin) else len(pattern)
        raise PatternError(f"{exc.msg} at position {pos}") from None
    except OverflowError as exc:  # e.g. a{99999999999}
        raise PatternError(str(exc)) from None
    except RecursionError:  # Python's parser recurses once per nested group
        raise PatternError("pattern is nested too deeply") from None


def pattern_matches(pattern: str, value: str) -> bool:
    """Unanchored search, as JSON Schema's `pattern` keyword does."""
    return compile_pattern(pattern).search(value) is not None
