"""The fuzz corpus: inputs kept for ever, each checked against the fuzz property in-process and
by the real `smllm validate --json` process; the inputs that once broke it also give exactly the
finding written in EXPECTED."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Ran
from helpers.fuzz_property import (
    CORPUS,
    CORPUS_LIMIT_S,
    KNOWN_BUGS,
    check_source,
    describe,
    line_count,
    one_line,
)

#: What the inputs that once broke the property (001-019 found by the fuzzer, 020 by review)
#: and a few others give now: the first error finding as `RULE LINE:COL MESSAGE`, or "loads"
#: for a machine with no error (`key: ~` counts as absent).
EXPECTED: dict[str, str] = {
    # was: a null transition raised AttributeError in read_transitions
    "001-null-transition.smllm.yaml": "loads",
    # was: a null action item raised AttributeError in read_actions
    "002-null-action-item.smllm.yaml": "FMT-5 11:8 exit must be a string or a mapping",
    # was: a null sharedActions entry raised AttributeError in read_shared
    "003-null-shared-entry.smllm.yaml": "FMT-5 8:6 sharedActions must be a mapping",
    # was: null paramDescriptions.EVENT raised TypeError in read_state
    "004-null-param-descriptions.smllm.yaml": "loads",
    # was: a list as a state's type raised TypeError (unhashable)
    "005-state-type-list.smllm.yaml": "FMT-5 15:11 type must be one of: final",
    # was: a list as a guard's type raised TypeError (unhashable)
    "006-guard-type-list.smllm.yaml": "FMT-5 12:39 type must be a string",
    # was: a mapping as an action's type raised TypeError (unhashable)
    "007-action-type-mapping.smllm.yaml": "FMT-5 11:41 type must be a string",
    # was: NUL in a prompt path raised ValueError from open()
    "008-prompt-file-nul.smllm.yaml": "MCH-11 10:43 no prompt file notes\\x00.md",
    # was: a 400-digit timeoutSecs raised OverflowError
    "009-huge-timeout.smllm.yaml": "MCH-10 10:64 timeoutSecs must be at most 31622400",
    # was: loaded; every check of the param raised PointerToNowhere
    "010-ref-to-missing-def.smllm.yaml": "EVT-1 11:26 $ref #/$defs/paths points at nothing in "
    "$defs",
    # was: loaded; every check of the param raised RecursionError
    "011-ref-cycle.smllm.yaml": "EVT-1 13:25 $ref loops without reaching a value: loop → loop",
    # was: jsonschema's metaschema check raised RecursionError
    "012-deep-param-schema.smllm.yaml": "EVT-1 10:212 the schema nests more than 32 levels deep",
    # was: the MCH-4 check walked every path (hours for 40 states)
    "013-always-paths-exponential.smllm.yaml": "loads",
    # was: FMT-1 without a line
    "014-deep-nesting-no-line.smllm.yaml": "FMT-1 4:1222 not valid YAML: the document is nested "
    "too deeply",
    # was: FMT-1 one line past the end of the file
    "015-error-past-end-of-file.smllm.yaml": "FMT-1 2:8 not valid YAML: while scanning a simple "
    "key: could not find expected ':'",
    # was: the message and path spanned two lines
    "016-line-break-in-name.smllm.yaml": "FMT-7 11:7 event name go\\nnow must match "
    "^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
    # was: accepted (nan <= 0 is false)
    "017-nan-timeout.smllm.yaml": "FMT-5 10:64 timeoutSecs must be a finite number (JSON has no "
    ".inf or .nan)",
    # was: accepted; kind is one line
    "018-kind-with-line-break.smllm.yaml": "FMT-5 5:21 kind must be a single line",
    # was: read whole (MemoryError); a FIFO blocked
    "019-prompt-file-dev-zero.smllm.yaml": "MCH-11 10:43 prompt file /dev/zero: not a regular file",
    # a pattern's `$` is ECMA-262's: the end of the text, not before a last line break
    "020-trailing-line-break-in-name.smllm.yaml": "FMT-7 11:11 state name B\\n must match "
    "^[A-Za-z0-9_-]+$",
    # a $ref that reaches a value (through properties or items) may recurse
    "066-recursive-param-schema.smllm.yaml": "loads",
}

# -- the corpus --------------------------------------------------------------------------------

CORPUS_FILES = sorted(CORPUS.glob("*.smllm.yaml"))
_CORPUS_NAME = re.compile(r"^[0-9]{3}-[a-z0-9-]+\.smllm\.yaml$")


def _corpus_params(check: str) -> list[Any]:
    out = []
    for path in CORPUS_FILES:
        bug = KNOWN_BUGS.get(path.name)
        marks: list[Any] = []
        if bug is not None:
            fails = bug.load if check == "load" else bug.cli
            if fails is None:  # a hang: the load test shows it, and shows when it's fixed
                marks.append(pytest.mark.xfail(run=False, reason=f"hangs: {bug.what}"))
            elif fails and check == "load":
                marks.append(
                    pytest.mark.xfail(strict=True, raises=KnownBugFailure, reason=bug.what)
                )
            elif fails:
                marks.append(pytest.mark.xfail(strict=True, reason=bug.what))
        out.append(pytest.param(path, id=path.name, marks=marks))
    return out


def test_corpus_names() -> None:
    assert len(CORPUS_FILES) >= 10
    numbers = [p.name[:3] for p in CORPUS_FILES]
    assert len(set(numbers)) == len(numbers), "two corpus files share a number"
    for path in CORPUS_FILES:
        assert _CORPUS_NAME.match(path.name), path.name
    assert set(KNOWN_BUGS) <= {p.name for p in CORPUS_FILES}, "KNOWN_BUGS names a missing file"
    assert set(EXPECTED) <= {p.name for p in CORPUS_FILES}, "EXPECTED names a missing file"
    assert not set(EXPECTED) & set(KNOWN_BUGS), "a bug is both fixed and known"
    # 001-049 are the inputs that broke the property: each is open or gives a known finding
    bugs = {p.name for p in CORPUS_FILES if int(p.name[:3]) < 50}
    assert bugs <= set(EXPECTED) | set(KNOWN_BUGS), sorted(bugs - set(EXPECTED) - set(KNOWN_BUGS))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_gives_its_finding(name: str) -> None:
    path = CORPUS / name
    result = check_source(path.read_bytes(), path, limit=CORPUS_LIMIT_S)
    errors = [f for f in result.findings if f.level == "error"]
    got = (
        f"{errors[0].rule} {errors[0].line}:{errors[0].col} {errors[0].message}"
        if errors
        else "loads"
    )
    assert got == EXPECTED[name]


@contextlib.contextmanager
def memory_cap(extra: int = 1 << 30) -> Iterator[None]:
    """At most `extra` more bytes of address space in this process while the block runs, so
    that a machine making smllm read a device such as /dev/zero fails with MemoryError
    instead of eating the machine (Linux; elsewhere nothing is capped)."""
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError, AttributeError):
        yield
        return
    cap = used + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class KnownBugFailure(Exception):
    """A corpus file failed the way its KNOWN_BUGS entry says (any other failure is a FAIL)."""


@pytest.mark.parametrize("path", _corpus_params("load"))
def test_corpus_load(path: Path) -> None:
    source = path.read_bytes()
    bug = KNOWN_BUGS.get(path.name)
    try:
        with memory_cap():
            check_source(source, path, limit=CORPUS_LIMIT_S)
    except Exception as exc:
        if bug is not None and re.search(bug.sign, describe(exc), re.DOTALL):
            raise KnownBugFailure(describe(exc)[:2000]) from None
        raise


def _limits() -> None:
    """In the child: at most 1 GiB of address space, so reading a device such as /dev/zero
    ends in MemoryError (exit 2) instead of eating the machine."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def validate_json(path: Path, cwd: Path, env: dict[str, str]) -> Ran:
    """`smllm validate --json PATH` as conftest's `smllm` runs it, with a memory cap and a
    shorter timeout: a corpus file may make smllm read without end."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "smllm", "validate", "--json", str(path)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
            preexec_fn=_limits if sys.platform != "win32" else None,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"smllm validate {path.name} hangs (30 s)") from None
    return Ran(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("path", _corpus_params("cli"))
def test_corpus_cli(path: Path, tmp_path: Path, env: dict[str, str]) -> None:
    import json

    ran = validate_json(path, tmp_path, env)
    assert ran.code in (0, 1), f"exit {ran.code}: {ran.err.strip()}"
    assert ran.err == "", ran.err
    out = json.loads(ran.out)
    assert isinstance(out, dict) and ran.out.strip().count("\n") == 0
    assert set(out) == {"ok", "files", "findings", "counts"}
    errors = [f for f in out["findings"] if f["level"] == "error"]
    assert out["ok"] is (ran.code == 0) and out["counts"]["error"] == len(errors)
    if ran.code == 1:
        assert errors and all(isinstance(f["line"], int) for f in errors), out["findings"]
    lines = line_count(path.read_bytes())
    for f in out["findings"]:
        one_line(f["message"], "message")
        assert f["line"] is None or 1 <= f["line"] <= lines, f"line out of the file: {f}"
