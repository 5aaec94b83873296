"""fuzz: hostile input, fuzzed machine files and fuzzed `fire` argument sets (hypothesis), in
this process and as `smllm` processes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .common import (
    BACKENDS,
    TESTS,
    Project,
    Size,
    Verdict,
    World,
    enter_argv,
    first_error,
    heading,
    line,
    ms_stats,
    run_cli,
    run_inproc,
)
from .store_checks import check_histories, read_store

#: words a fuzzed `fire` is made of
FIRE_EVENTS = (
    "enter",
    "yield",
    "pause",
    "resume",
    "listPaused",
    "unmatched",
    "planned",
    "done",
    "PLAN",
    "",
    "-",
    "--json",
    "enter ",
    "ENTER",
    "é",
    "a\nb",
)
PARAM_NAMES = (
    "stateMachine",
    "issueId",
    "size",
    "note",
    "state",
    "",
    "=",
    "a b",
    "issueId ",
    "é",
    "params",
    "x" * 300,
)
PARAM_VALUES = (
    "dev", "GH-1", "GH-2", "GH-999999999999999999999", "small", "large", "PLAN", "WORK", "DONE",
    "", " ", "=", '{"a": 1}', "[1]", "1e400", "null", "true", "-1", "x\ny", "\r", "\x00", "\x85",
    "\u2028", "é", "日本語",
    "</smllm>", "GH-1\n", "x" * 100_000, '"GH-1"', "\ud800", "\udcff",
)  # fmt: skip
PARAMS_JSON = (
    "{}", "[]", "null", "1", '"x"', "{", '{"stateMachine": "dev", "issueId": "GH-1"}',
    '{"size": "small"}',
    '{"size": ["small"]}', '{"note": null}', '{"a": ' * 200 + "1" + "}" * 200, '{"x": 1e999}',
    '{"stateMachine": "dev", "stateMachine": "dev"}', "\ufeff{}", '{"\\ud800": 1}', "-", "",
)  # fmt: skip


def fire_argvs(keys: list[str]) -> Any:
    """A hypothesis strategy of `fire` argument lists (and the standard input)."""
    from hypothesis import strategies as st

    text = st.text(max_size=20)
    value = st.sampled_from(PARAM_VALUES) | text
    name = st.sampled_from(PARAM_NAMES) | text
    json_value = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | text,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(PARAM_NAMES) | text, inner, max_size=3)
        ),
        max_leaves=8,
    )
    params_json = st.sampled_from(PARAMS_JSON) | json_value.map(json.dumps) | text
    session = (
        st.sampled_from(
            [*keys, "sm-zzzzzz", "", "sm-", "SM-" + keys[0][3:], keys[0] + "x", "--json"]
        )
        | text
    )
    extra = st.sampled_from(
        [
            "--",
            "-x",
            "--param",
            "--params",
            "--session",
            "--host",
            "--json",
            "--config",
            "--config=/nonexistent",
            "-h",
        ]
    )

    @st.composite
    def build(draw: Any) -> tuple[list[str], str]:
        argv: list[str] = []
        if draw(st.booleans()):
            argv += ["--session", draw(session)]
        argv.append(draw(st.sampled_from(FIRE_EVENTS)) if draw(st.integers(0, 4)) else draw(text))
        for _ in range(draw(st.integers(0, 4))):
            # mostly NAME=VALUE; one in ten a bare word
            p = draw(value) if draw(st.integers(0, 9)) == 0 else f"{draw(name)}={draw(value)}"
            argv += ["--param", p] if draw(st.integers(0, 9)) else [f"--param={p}"]
        stdin = ""
        if draw(st.integers(0, 3)) == 0:
            pj = draw(params_json)
            if draw(st.booleans()):
                stdin, pj = pj, "-"
            argv += ["--params", pj]
        for flag in ("--json", "--host"):
            if draw(st.integers(0, 3)) == 0:
                argv.append(flag)
        for _ in range(draw(st.integers(1, 2)) if draw(st.integers(0, 9)) == 0 else 0):
            argv.insert(draw(st.integers(0, len(argv))), draw(extra))
        if draw(st.integers(0, 19)) != 0:
            argv.insert(0, "fire")  # mostly a fire; sometimes the words without it
        return argv, stdin

    return build()


def judge_fire(argv: list[str], code: int, out: str, err: str) -> str | None:
    """What's wrong with a fuzzed call's reply, if anything."""
    text = out + err
    if "Traceback" in text:
        return "a traceback"
    if "internal error" in text:
        return f"an internal error: {first_error(out, err)}"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if code != 0 and "error: " not in text:
        return f"exit {code} without an error: line: {text[-300:]!r}"
    if (
        "--json" in argv
        and code in (0, 1)
        and out.strip()
        and argv[:1] == ["fire"]
        and "-h" not in argv
    ):
        try:
            json.loads(out)
        except ValueError:
            return f"--json printed no JSON: {out[:200]!r}"
    return None


class Hang(BaseException):
    pass


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    def ring(signum: int, frame: object) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def fuzz_fires(p: Project, cases: int, samples: int, v: Verdict) -> None:
    """`cases` fuzzed fire argument sets in this process (the real CLI entry point), `samples`
    of them also as `smllm fire` processes."""
    from hypothesis import HealthCheck, Phase, given, settings

    where = f"fuzz fire/{p.backend}"
    saved = {k: os.environ.get(k) for k in p.env}
    os.environ.update(p.env)
    cwd = os.getcwd()
    os.chdir(p.folder)
    try:
        keys = []
        for ref in ("GH-1", None):
            code, out, err = run_inproc(["session", "new", "--json"])
            keys.append(json.loads(out)["session"])
            if ref:
                run_inproc(enter_argv(keys[-1], ref))
        codes: Counter[str] = Counter()
        times: list[float] = []
        sampled: list[tuple[list[str], str]] = []
        every = max(1, cases // max(1, samples))
        n = 0

        @settings(
            max_examples=cases,
            derandomize=False,
            database=None,
            deadline=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
        )
        @given(fire_argvs(keys))
        def one(case: tuple[list[str], str]) -> None:
            nonlocal n
            argv, stdin = case
            n += 1
            t0 = time.perf_counter()
            try:
                with alarm(20):
                    code, out, err = run_inproc(argv, stdin)
            except Hang:
                v.fail(f"{where}: smllm {argv!r} hangs (20 s)")
                return
            times.append((time.perf_counter() - t0) * 1000)
            codes[f"exit {code}"] += 1
            if code == 2 and out.startswith("usage: smllm") and not err:
                # no command given (`smllm --config X`): the help, exit 2, no `error:` line;
                # counted, reported to the CLI's owner, not failed here
                codes["of which help without a command"] += 1
                return
            wrong = judge_fire(argv, code, out, err)
            if wrong:
                v.fail(f"{where}: smllm {argv!r}: {wrong}")
            if (
                n % every == 0
                and len(sampled) < samples
                and all("\ud800" not in a and "\udcff" not in a and "\x00" not in a for a in argv)
            ):
                sampled.append((argv, stdin))

        began = time.monotonic()
        one()
        wall = time.monotonic() - began
    finally:
        os.chdir(cwd)
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
    sample_codes: Counter[str] = Counter()
    for argv, stdin in sampled:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "smllm", *argv],
                cwd=p.folder,
                env=p.env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
            )
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            v.fail(f"{where}: the process smllm {argv!r} hangs (60 s)")
            continue
        sample_codes[f"exit {code}"] += 1
        wrong = judge_fire(argv, code, out, err)
        if wrong:
            v.fail(f"{where}: the process smllm {argv!r}: {wrong}")
    snap = read_store(p)
    v.extend(snap.torn, f"{where}: torn")
    v.extend(check_histories(snap.instances, snap.history), where)
    print(f"  [{p.backend}] fire argument sets")
    line(
        "in process",
        f"{n} cases in {wall:.1f} s ({n / wall:.0f}/s): "
        + ", ".join(f"{k} {c}" for k, c in sorted(codes.items())),
    )
    line("a call took", ms_stats(times))
    line(
        "as processes",
        f"{sum(sample_codes.values())} samples: "
        + ", ".join(f"{k} {c}" for k, c in sorted(sample_codes.items())),
    )
    line(
        "store after",
        f"{len(snap.instances)} instances, {snap.records} history records, {len(snap.torn)} torn",
    )


def fuzz_machines(world: World, cases: int, samples: int, v: Verdict) -> None:
    """`cases` fuzzed machine files through the loader `smllm validate` uses (tests/
    helpers/fuzz_property.check_source: findings with lines, a machine only without errors, the
    engine's use of a machine that loads), `samples` of them through `smllm validate`."""
    import helpers.fuzz_property as fuzz_property
    from helpers.fuzz_strategies import mutated_machines, mutated_texts, random_machines
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    where = "fuzz machines"
    folder = world.root / "fuzz-machines"
    folder.mkdir()
    env = world.project("sqlite", name="fuzz-validate").env
    kinds: Counter[str] = Counter()
    sampled: list[bytes] = []
    every = max(1, cases // max(1, samples))
    n = 0
    strategy = st.one_of(
        mutated_machines().map(lambda c: ("data", c[0], c[1])),
        mutated_texts().map(lambda c: ("bytes", c[0], c[1])),
        random_machines().map(lambda t: ("random", TESTS / "machines" / "random.smllm.yaml", t)),
    )

    @settings(
        max_examples=cases,
        derandomize=False,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(case: tuple[str, Path, str | bytes]) -> None:
        nonlocal n
        how, path, source = case
        n += 1
        try:
            result = fuzz_property.check_source(source, path, limit=10)
        except Exception as exc:  # every failure is a finding of the campaign
            v.fail(f"{where}: {how}: {fuzz_property.describe(exc)[:300]} for {source[:200]!r}")
            return
        errors = sum(f.level == "error" for f in result.findings)
        kinds[f"{how}: {'loads' if result.machine is not None else 'refused'}"] += 1
        kinds["findings"] += len(result.findings)
        kinds["error findings"] += errors
        if n % every == 0 and len(sampled) < samples:
            sampled.append(source.encode() if isinstance(source, str) else source)

    began = time.monotonic()
    one()
    wall = time.monotonic() - began
    codes: Counter[str] = Counter()
    for i, source in enumerate(sampled):
        path = folder / f"case-{i}.smllm.yaml"
        path.write_bytes(source)
        code, out, err = run_cli(["validate", str(path)], folder, env, timeout=60)
        codes[f"exit {code}"] += 1
        text = out + err
        if code == 124:
            v.fail(f"{where}: smllm validate hangs on {source[:200]!r}")
        elif "Traceback" in text or "internal error" in text or code not in (0, 1, 2):
            v.fail(f"{where}: smllm validate exit {code}: {text[-300:]!r} on {source[:200]!r}")
        elif code != 0 and not re.search(r"(^|: )error: ", text, re.M):
            v.fail(f"{where}: smllm validate exit {code} with no error: {text[-300:]!r}")
    print("  [machine files]")
    line("in process", f"{n} cases in {wall:.1f} s ({n / wall:.0f}/s)")
    line("outcomes", ", ".join(f"{k} {c}" for k, c in sorted(kinds.items())))
    line(
        "smllm validate processes",
        f"{len(sampled)} samples: " + ", ".join(f"{k} {c}" for k, c in sorted(codes.items())),
    )


def fuzz(world: World, size: Size, v: Verdict) -> None:
    heading(
        f"fuzz: {size.fuzz_machines} machine files, {size.fuzz_fires} fire argument sets "
        f"per backend (not derandomized)"
    )
    fuzz_machines(world, size.fuzz_machines, size.fuzz_samples, v)
    for backend in BACKENDS:
        fuzz_fires(world.project(backend), size.fuzz_fires, size.fuzz_samples, v)
