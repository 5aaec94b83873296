"""The seed's example session as a golden transcript (tests/golden/transcript.txt): its steps,
for the tests that replay it (test_transcript) or compare against it (test_run)."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["GOLDEN", "SEED_KEY", "golden_output", "parse"]

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "transcript.txt"
#: the session key the transcript was written with
SEED_KEY = "sm-nqvfvw"


def parse(text: str) -> list[tuple[str, str, int]]:
    """(command, expected stdout, exit code) for each `$` step of the transcript."""
    steps: list[tuple[str, str, int]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            out: list[str] = []
            i += 1
            while not re.fullmatch(r"\[exit \d+\]", lines[i]):
                out.append(lines[i])
                i += 1
            code = int(lines[i][6:-1])
            steps.append((line[2:], "".join(o + "\n" for o in out), code))
        i += 1
    return steps


def golden_output(command: str, key: str, nth: int = 1) -> str:
    """The expected stdout of the `nth` step whose command is `command` (written with the
    seed's key), with `key` for the seed's."""
    found = [out for cmd, out, _ in parse(GOLDEN.read_text()) if cmd == command]
    return found[nth - 1].replace(SEED_KEY, key)
