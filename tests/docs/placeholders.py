"""The placeholders of the docs' examples: the only text of an example's output that may differ
from what smllm printed. Everything else must match byte for byte.

A page shows real output from one run. What changes from run to run is written as it came out
that once, and each class below pairs it with what this run printed:

- **ids**: session keys (`sm-` and six characters, such as `sm-nqvfvw`) and instance ids (`i-`
  and six, such as `i-k0xzjt`). The first new id this run prints stands for the first new id
  the page shows at that point, and keeps standing for it on the rest of the page; a command
  that names a shown id runs with the real one. An id the page doesn't show in its place is
  kept as printed (and then fails the comparison).
- **demo folders**: `smllm demo`'s throw-away folder, `/tmp/smllm-demo-` and eight characters.
- **times**: an ISO 8601 time (`2026-12-05T05:40:39Z`, with or without fractions or an
  offset) or a date and time with a space (`2026-12-05 05:40:39`, `2026-12-05 05:40`).
- **durations**: a number of seconds or milliseconds that a command measured (`0.12 s`,
  `31 ms`).

Paths: each page runs in a fresh folder whose HOME is shown as `/home/you`; the page's commands
run in `/home/you/project`, and the temp folder (`TMPDIR`) is shown as `/tmp`. Those are
replaced, not paired.

How smllm was installed: `smllm harness install` notes when the smllm on PATH comes from an
active virtual environment (`note: smllm is on PATH from the virtual environment …`). The pages
show an install outside one, so that line is dropped from what a run printed.

Times and durations are matched by position instead: the Nth time this run printed in a
command's output is written as the Nth time the page shows there (two calls a second apart
print two times where the page may show one twice). They never go into a command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: the note of an install run from an active virtual environment (not shown on the pages)
VENV_NOTE = re.compile(r"^note: smllm is on PATH from the virtual environment .*\n", re.M)

#: the shown HOME, project folder and temp folder of every page
SHOWN_HOME = "/home/you"
SHOWN_PROJECT = "/home/you/project"
SHOWN_TMP = "/tmp"

_BASE32 = "[0-9a-hjkmnp-tv-z]"


@dataclass(frozen=True)
class Placeholder:
    """One class of run-dependent text: its pattern, and whether a command may name it."""

    name: str
    pattern: re.Pattern[str]
    in_commands: bool


PLACEHOLDERS: tuple[Placeholder, ...] = (
    Placeholder("session key", re.compile(rf"\bsm-{_BASE32}{{6}}\b"), True),
    Placeholder("instance id", re.compile(rf"\bi-{_BASE32}{{6}}\b"), True),
    Placeholder("demo folder", re.compile(r"/tmp/smllm-demo-[a-z0-9_]{8}\b"), True),
    Placeholder(
        "time",
        re.compile(
            r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?(?![\d:])"
        ),
        False,
    ),
    Placeholder("duration", re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b"), False),
)


def _distinct(pattern: re.Pattern[str], text: str) -> list[str]:
    seen: list[str] = []
    for match in pattern.finditer(text):
        if match.group() not in seen:
            seen.append(match.group())
    return seen


def _by_position(pattern: re.Pattern[str], actual: str, expected: str) -> str:
    """`actual` with its Nth match of `pattern` replaced by the Nth match in `expected`."""
    shown = iter([m.group() for m in pattern.finditer(expected)])

    def swap(match: re.Match[str]) -> str:
        return next(shown, match.group())

    return pattern.sub(swap, actual)


@dataclass
class Pairing:
    """What each real value of a page's run stands for on the page (real → shown)."""

    shown: dict[str, str] = field(default_factory=dict)

    def bind(self, expected: str, actual: str) -> None:
        """Pair this output's new real ids with its new shown ones, in order of appearance."""
        for placeholder in PLACEHOLDERS:
            if not placeholder.in_commands:
                continue
            bound_shown = set(self.shown.values())
            new_real = [v for v in _distinct(placeholder.pattern, actual) if v not in self.shown]
            new_shown = [
                v for v in _distinct(placeholder.pattern, expected) if v not in bound_shown
            ]
            for real, shown in zip(new_real, new_shown, strict=False):
                self.shown[real] = shown
            for real in new_real[len(new_shown) :]:
                if real not in bound_shown:  # more ids than the page shows: kept as printed
                    self.shown[real] = real

    def normalise(self, actual: str, expected: str) -> str:
        """`actual` with each paired real id written as the page shows it, and each time or
        duration as the one at its position in `expected`; without the virtual environment's
        note of an install."""
        actual = VENV_NOTE.sub("", actual)
        for placeholder in PLACEHOLDERS:
            if placeholder.in_commands:
                actual = placeholder.pattern.sub(
                    lambda m: self.shown.get(m.group(), m.group()), actual
                )
            else:
                actual = _by_position(placeholder.pattern, actual, expected)
        return actual

    def command(self, shown_command: str) -> str:
        """A shown command with each shown id that stands for a real one replaced by it."""
        real_of = {s: r for r, s in self.shown.items()}
        for placeholder in PLACEHOLDERS:
            if placeholder.in_commands:
                shown_command = placeholder.pattern.sub(
                    lambda m: real_of.get(m.group(), m.group()), shown_command
                )
        return shown_command


def shown_paths(text: str, home: str, tmp: str) -> str:
    """`text` with the page's real HOME and temp folder written as the page shows them."""
    return text.replace(home, SHOWN_HOME).replace(tmp, SHOWN_TMP)
