"""The fuzz property of the machine-file loader, shared by the fuzz tests (test_fuzz.py) and
the corpus tests (test_fuzz_corpus.py). test_fuzz.py's docstring states the property."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import signal
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from conftest import bounded
from helpers.scripted_host import ScriptedHost
from hypothesis import HealthCheck, event, settings

import smllm.examples
from smllm.engine.records import Instance
from smllm.engine.reply import Header, IdleList, MachineLine, Reply
from smllm.engine.rules import check_params, state_events
from smllm.engine.steps import entry_prompts
from smllm.machine.findings import LEVELS, Finding
from smllm.machine.loader.load import LoadResult, load_machine_source
from smllm.machine.model import Command, Machine
from smllm.machine.regex import pattern_matches
from smllm.text.block import render

HERE = Path(__file__).resolve().parents[1]  # tests/
CORPUS = HERE / "fuzz_corpus"
DEV = Path(smllm.examples.__file__).resolve().parent / "dev" / "dev.smllm.yaml"
SEEDS: tuple[Path, ...] = (
    *sorted((HERE / "machines").glob("*.smllm.yaml")),
    HERE / "machines" / "fix" / "fix.smllm.yaml",
    DEV,
)
SHOWN = "fuzz.smllm.yaml"

TOTAL = int(os.environ.get("SMLLM_FUZZ_EXAMPLES", "300"))
RANDOM = bool(os.environ.get("SMLLM_FUZZ_RANDOM"))
CASE_LIMIT_S = float(os.environ.get("SMLLM_FUZZ_CASE_LIMIT", "5"))
#: corpus files are small: each loads in milliseconds, so a known hang costs little CI time
CORPUS_LIMIT_S = 2.0


class Bug(NamedTuple):
    """A corpus input that breaks the property today."""

    what: str
    sign: str  # a regex that `describe()` of the failure matches: the fuzzer tolerates it
    load: bool = True  # the in-process property fails
    cli: bool | None = True  # `smllm validate` fails; None: it hangs, so it isn't run


#: Corpus inputs that break the property today, found and not yet fixed. Each of their corpus
#: tests is an xfail(strict=True): once the bug is fixed the test passes, strict fails, and the
#: entry goes. The fuzz tests tolerate a failure matching an entry's sign, so they stay a gate
#: for new bugs. (Empty: the 19 bugs the fuzzer found are fixed; test_fuzz_corpus.EXPECTED says
#: what each input gives now.)
KNOWN_BUGS: dict[str, Bug] = {}


_RULE = re.compile(r"^(FMT|MCH|EVT|AGT)-[0-9]+$")
_BREAKS = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_TAGS = ("</smllm>", "</instructions>", "</events>")


def fuzz_settings(share: float) -> settings:
    """conftest.BOUNDED: a failure reports in seconds (no shrinking; the per-case limit below
    is the hang check, CI machines being slow)."""
    return bounded(
        max_examples=max(1, round(TOTAL * share)),
        derandomize=not RANDOM,
        suppress_health_check=list(HealthCheck),
    )


# -- the property ------------------------------------------------------------------------------


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so no `except Exception` in the loader eats it."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Fail (AssertionError) when the block runs longer than `seconds`, even if it never
    returns: SIGALRM interrupts it where the platform has one."""
    has_alarm = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")

    def alarm(signum: int, frame: object) -> None:
        raise _Hang

    previous: Any = None
    if has_alarm:
        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.perf_counter()
    try:
        yield
    except _Hang as hang:
        where = _frames(hang.__traceback__)
        raise AssertionError(
            f"{what} hangs: still running after {seconds:g} s, in {where}"
        ) from None
    finally:
        if has_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start
    assert elapsed < seconds, f"{what} took {elapsed:.1f} s (limit {seconds:g} s)"


def _frames(tb: TracebackType | None) -> str:
    """smllm's functions in a traceback, innermost first: `read_state < structure < …`."""
    names = [
        f.name
        for f in traceback.extract_tb(tb)
        if "/smllm/" in f.filename.replace("\\", "/") and "/tests/" not in f.filename
    ]
    return " < ".join(reversed(names))


def describe(exc: BaseException) -> str:
    """`TYPE: MESSAGE @ innermost < … < outermost` smllm function: what `Bug.sign` matches."""
    return f"{type(exc).__name__}: {exc} @ {_frames(exc.__traceback__)}"


def known_bug(exc: BaseException) -> str | None:
    """The KNOWN_BUGS file whose sign the failure matches, if any."""
    text = describe(exc)
    for name, bug in KNOWN_BUGS.items():
        if re.search(bug.sign, text, re.DOTALL):
            return name
    return None


def line_count(source: bytes | str) -> int:
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return len(_BREAKS.findall(text)) + 1


def one_line(value: str, what: str) -> None:
    assert isinstance(value, str), f"{what} is not a str: {value!r}"
    assert len(value.splitlines()) <= 1 and "\n" not in value, f"{what} spans lines: {value!r}"


def check_wording(f: Finding, rules: re.Pattern[str]) -> None:
    """A finding's rule is one of `rules` at its level, and every part of it is one line."""
    assert isinstance(f, Finding)
    str(f), repr(f)
    assert rules.match(f.rule), f"unexpected rule {f.rule!r}"
    assert f.level == LEVELS.get(f.rule, "error"), f"{f.rule} has level {f.level}"
    one_line(f.message, "message")
    assert f.message.strip(), f"empty message for {f.rule}"
    if f.path is not None:
        one_line(f.path, "path")
    if f.hint is not None:
        one_line(f.hint, "hint")
    one_line(f.text(), "the finding's text")


def check_finding(f: Finding, lines: int) -> None:
    check_wording(f, _RULE)  # the rules of one machine file
    if f.level == "error":
        assert f.line is not None, f"error without a line: {f.text()}"
    if f.line is not None:
        assert isinstance(f.line, int) and 1 <= f.line <= lines, f"line out of the file: {f}"
    if f.col is not None:
        assert f.line is not None and isinstance(f.col, int) and f.col >= 1, f"bad column: {f}"


def check_result(result: LoadResult, source: bytes | str) -> None:
    assert isinstance(result, LoadResult)
    assert isinstance(result.findings, list)
    lines = line_count(source)
    for f in result.findings:
        check_finding(f, lines)
    errors = [f for f in result.findings if f.level == "error"]
    if result.machine is not None:
        assert isinstance(result.machine, Machine)
        assert not errors, f"a machine AND errors: {[f.text() for f in errors]}"
    else:
        assert errors, f"no machine but no error: {[f.text() for f in result.findings]}"
    assert result.top_id is None or isinstance(result.top_id, str)
    assert all(isinstance(r, str) for r in result.reads)


_VALUES: tuple[Any, ...] = ("x", "BUG-1", "[1]", '{"a": 1}', "", 3, 1.5, None, True, ["a"], {})


def check_machine(machine: Machine, findings: list[Finding]) -> None:
    """What the engine relies on in a machine that loaded."""
    back = pickle.loads(pickle.dumps(machine, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.id == machine.id and list(back.states) == list(machine.states)
    states = machine.states
    assert machine.initial in states
    assert machine.fallback is None or not states[machine.fallback].final
    for shared in machine.shared:
        assert shared.states <= set(states)
    if machine.ref.pattern is not None:
        pattern_matches(machine.ref.pattern, "BUG-1")
    # machine-format.md §2.3: kind is "a non-empty single-line string"
    assert machine.kind.strip() and len(machine.kind.splitlines()) == 1, (
        f"kind {machine.kind!r} is not one non-empty line"
    )
    for command in _commands(machine):
        # §2.8: timeoutSecs is a number > 0 (NaN is not)
        assert command.timeout > 0, f"timeoutSecs {command.timeout_text} was accepted"
    tagged = any(f.rule == "AGT-1" for f in findings)
    host = ScriptedHost(seed=1)
    line = MachineLine(
        machine.id,
        machine.description,
        machine.kind,
        machine.ref.param,
        machine.ref.pattern,
        machine.ref.description,
        machine.initial,
        tuple(machine.entry_points()),
        machine.host_only(),
    )
    idle = render(Reply(Header("sm-fuzz00"), idle=IdleList((line,), None, (), 0)))
    _one_block(idle, True)
    for name, state in states.items():
        for candidates in (*state.on.values(), state.always):
            for t in candidates:
                assert t.target is None or t.target in states
                if t.guard is not None and t.guard.kind == "visits":
                    assert t.guard.state in states and t.guard.at_least >= 1
        if state.final:
            continue
        inst = Instance(
            "i-fuzz00", machine.id, None, name, "active", "sm-fuzz00", None, 1, {name: 1},
            name, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z",
        )  # fmt: skip
        events = state_events(machine, state, inst, "sm-fuzz00")
        prompts, _failures = entry_prompts(machine, state, host)
        header = Header("sm-fuzz00", machine.id, name, 1, machine.kind, inst.label)
        block = render(Reply(header, instructions=tuple(prompts), events=events))
        _one_block(block, not tagged)
        for offered, specs in state.params.items():
            ev = machine.events.get(offered)
            defs = ev.defs if ev is not None else None
            check_params(offered, specs, defs, ())
            for spec in specs:
                for value in _VALUES:
                    refusal, _ = check_params(offered, specs, defs, ((spec.name, value),))
                    assert refusal is None or isinstance(refusal, str)


def _commands(machine: Machine) -> Iterator[Command]:
    """Every command of the machine's guards and actions."""
    lists = [a for s in machine.shared for a in (s.entry, s.exit)]
    for state in machine.states.values():
        lists += [state.entry, state.exit]
        for t in (*(t for c in state.on.values() for t in c), *state.always):
            lists.append(t.actions)
            if t.guard is not None and t.guard.command is not None:
                yield t.guard.command
    for actions in lists:
        for action in actions:
            if action.command is not None:
                yield action.command


def _one_block(block: str, exact: bool) -> None:
    """An smllm block: opens once, closes once, at its ends (author text aside, see AGT-1)."""
    assert block.startswith("<smllm>\n") and block.endswith("\n</smllm>")
    if exact:
        low = block.lower()
        assert low.count("</smllm>") == 1, block
        assert low.count("</events>") <= 1 and low.count("</instructions>") <= 1, block


def check_source(source: bytes | str, path: Path | str, limit: float = CASE_LIMIT_S) -> LoadResult:
    """Load `source` as if it were the file at `path` and check the whole property."""
    with time_limit(limit, "loading"):
        result = load_machine_source(source, str(path), SHOWN)
    check_result(result, source)
    if result.machine is not None:
        with time_limit(limit, "using the machine"):
            check_machine(result.machine, result.findings)
            check_views(result.machine)
            check_compiled(result, str(path))
    return result


def check_views(machine: Machine) -> None:
    """Every `smllm graph` form renders; Mermaid labels stay on their line."""
    from smllm.cli import graph

    graph._text(machine), graph._dot(machine), graph._json(machine)
    for line in graph._mermaid(machine):
        one_line(line, "a Mermaid line")


def check_compiled(result: LoadResult, path: str) -> None:
    """`smllm compile`'s normal form loads back as the same machine (or can't be written, when
    an inlined prompt file can't be read: then compile says so and writes nothing)."""
    from helpers.machine_meaning import meaning

    from smllm.machine.normal import NormalFormError, dump_normal, normal_form

    assert result.machine is not None and result.data is not None
    folder = os.path.dirname(path)
    try:
        text = dump_normal(normal_form(result.data, path, folder))
    except NormalFormError:
        return
    back = load_machine_source(text, os.path.join(folder, "compiled.json"), "compiled.json")
    errors = [f.text() for f in back.findings if f.level == "error"]
    assert back.machine is not None, f"the compiled form doesn't load: {errors}"
    assert meaning(back.machine) == meaning(result.machine), (
        "the compiled form means another machine"
    )


def fuzz_check(source: bytes | str, path: Path | str) -> None:
    """check_source, tolerating the failures of KNOWN_BUGS (their corpus tests track them),
    so that the fuzzer stays a gate for new bugs."""
    try:
        check_source(source, path)
    except Exception as exc:
        bug = known_bug(exc)
        if bug is None:
            raise
        event(f"known bug {bug[:3]}")
