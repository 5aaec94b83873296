"""smllm hook speed and robustness report (cli-and-harnesses.md §5).

    python bench/hook_bench.py                 # speed: each hook's process vs `python -c pass`
    python bench/hook_bench.py --fuzz 10000    # and N hypothesis payloads through each hook
    python bench/hook_bench.py --fuzz 0        # speed only

Speed targets (wall time, interleaved runs): a blocked stop <= 2.5x `python -c pass`; an
allowing stop, user-prompt-submit and the status line <= 2x. Each hook's run is paired with a
`python -c pass` run just before it, and the verdict reads the median of those pairs' ratios
("paired"): on a shared VM whose speed drifts by half from one second to the next, a ratio of
two medians taken seconds apart moves with the drift, a pair's ratio much less. The ratio of
the medians is printed beside it. Both sides run on a regular install of this tree
(report.regular_install: a venv of its own, `pip install` of a wheel, .pyc compiled and
written, no PYTHONDONTWRITEBYTECODE), the hook through the installed console script
(`VENV/bin/smllm harness hook claude HOOK`), the baseline as `VENV/bin/python -c pass`; each
reads the same stdin payload. A report, not a gate: it exits 0 whatever it measured.

Fuzz: N hypothesis-generated stdin payloads (tests/helpers/hook_inputs.py's `payloads`: garbage
bytes, empty, huge, wrong types, deep nesting, valid-looking payloads with hostile strings),
each through the three hooks of a drawn harness in process (`run_hook` with stdin and stdout
handed in), plus --fuzz-procs of them through real processes of the installed script; counted:
tracebacks, hangs (> 5 s), stdout on failure, non-JSON (or wrong-form) stdout, internal errors.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, HERE)

from bench import default_venv_cache  # noqa: E402
from report import regular_install  # noqa: E402

#: hook → the most its median may be, as a multiple of `python -c pass`
TARGETS = {
    "stop (block)": 2.5,
    "stop (allow: idle)": 2.0,
    "stop (allow: yielded)": 2.0,
    "user-prompt-submit": 2.0,
    "user-prompt-submit (clears)": 2.0,
    "statusline (held session)": 2.0,
}


def _env(root: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("SMLLM_CONFIG", None)
    for name, sub in (
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_CONFIG_HOME", "config"),
        ("HOME", "home"),
    ):
        env[name] = os.path.join(root, sub)
    return env


def _run(argv: list[str], stdin: bytes, cwd: str, env: dict[str, str]) -> tuple[float, str, str]:
    t0 = time.perf_counter_ns()
    proc = subprocess.run(argv, input=stdin, cwd=cwd, env=env, capture_output=True)
    ms = (time.perf_counter_ns() - t0) / 1e6
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()}")
    return ms, proc.stdout.decode(), proc.stderr.decode()


def _body(host: str, project: str, **more: Any) -> bytes:
    return json.dumps({"session_id": host, "cwd": project, **more}).encode()


class Hooks:
    """The hooks of `smllm` (an argv prefix) in one project."""

    def __init__(self, smllm: list[str], project: str, env: dict[str, str]) -> None:
        self.smllm, self.project, self.env = smllm, project, env

    def call(self, hook: str, host: str, **more: Any) -> tuple[float, str, str]:
        argv = [*self.smllm, "harness", "hook", "claude", hook]
        return _run(argv, _body(host, self.project, **more), self.project, self.env)

    def start(self, host: str) -> str:
        _, out, _ = self.call("session-start", host)
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        return str(text.split("\n")[1].split(" ")[1])

    def fire(self, key: str, *event: str) -> None:
        argv = [*self.smllm, "fire", "--session", key, *event]
        _run(argv, b"", self.project, self.env)

    def held(self, host: str, issue: int) -> str:
        key = self.start(host)
        self.fire(key, "enter", "--param", "stateMachine=dev", "--param", f"issueId=GH-{issue}")
        return key


def speed(python: str, script: str, root: str, runs: int) -> None:
    from smllm.cli.demo import copy_example

    env = _env(root)
    project = os.path.join(root, "project")
    os.makedirs(project)
    copy_example(project)
    # the sessions are made, and the compiled machine cache built, by this tree's smllm: the
    # regular install has no YAML parser (the measured paths never load one)
    setup = Hooks([sys.executable, "-m", "smllm"], project, env)
    setup.start("idle")
    setup.fire(setup.held("yielded", 1), "yield")
    for issue, host in enumerate(("block", "clears", "runaway"), 2):
        setup.held(host, issue)
    hooks = Hooks([script], project, env)

    def expect(kind: str) -> Any:
        def checked(result: tuple[float, str, str]) -> float:
            ms, out, err = result
            got = "block" if out.startswith('{"decision":"block"') else out.strip()
            got = "runaway" if err.startswith("<smllm>") else got
            if got != kind:
                raise RuntimeError(f"expected {kind}, got {out[:60]!r} {err[:60]!r}")
            return ms

        return checked

    pass_argv = [python, "-c", "pass"]
    variants: dict[str, tuple[Any, Any]] = {
        "python -c pass": (
            None,
            lambda: _run(pass_argv, _body("x", project), project, env)[0],
        ),
        "stop (block)": (
            lambda: hooks.call("user-prompt-submit", "block", prompt="go on"),
            lambda: expect("block")(hooks.call("stop", "block", stop_hook_active=False)),
        ),
        "stop (runaway)": (
            lambda: (
                hooks.call("user-prompt-submit", "runaway", prompt="go on"),
                hooks.call("stop", "runaway", stop_hook_active=False),
            ),
            lambda: expect("runaway")(hooks.call("stop", "runaway", stop_hook_active=True)),
        ),
        "stop (allow: idle)": (
            None,
            lambda: expect("{}")(hooks.call("stop", "idle", stop_hook_active=False)),
        ),
        "stop (allow: yielded)": (
            None,
            lambda: expect("{}")(hooks.call("stop", "yielded", stop_hook_active=False)),
        ),
        "stop (no session bound)": (
            None,
            lambda: expect("{}")(hooks.call("stop", "unbound", stop_hook_active=False)),
        ),
        "user-prompt-submit": (
            None,
            lambda: expect("{}")(hooks.call("user-prompt-submit", "idle", prompt="hi")),
        ),
        "user-prompt-submit (clears)": (
            lambda: hooks.call("stop", "clears", stop_hook_active=False),
            lambda: expect("{}")(hooks.call("user-prompt-submit", "clears", prompt="hi")),
        ),
        "session-start (resume)": (
            None,
            lambda: hooks.call("session-start", "block")[0],
        ),
        # Claude's statusLine command: its status JSON on stdin names the claude session
        "statusline (held session)": (
            None,
            lambda: _run([script, "statusline"], _body("block", project), project, env)[0],
        ),
        # for reading the ratios: what the console script of a pip older than 25.2 costs before
        # smllm runs (it imports re), as a bare interpreter doing only that
        "python -c 'import re'": (
            None,
            lambda: _run([python, "-c", "import re"], b"", project, env)[0],
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    paired: dict[str, list[float]] = {name: [] for name in variants}
    measure_base = variants["python -c pass"][1]
    for i in range(runs + 3):  # interleaved, the first three rounds warm up
        for name, (before, timed) in variants.items():
            if before is not None:
                before()
            # the baseline again just before: the pair sees the machine in the same state
            base_ms = measure_base() if name != "python -c pass" else None
            ms = timed()
            if i >= 3:
                times[name].append(ms)
                paired[name].append(ms / base_ms if base_ms else 1.0)
    base = statistics.median(times["python -c pass"])
    print(f"\n== hook processes: medians of {runs} interleaved runs (ms) ==")
    print(f"{'':32}{'median':>9}{'p90':>9}{'ratio':>8}{'paired':>8}  target (on paired)")
    for name, values in times.items():
        med = statistics.median(values)
        p90 = sorted(values)[int(len(values) * 0.9) - 1]
        ratio = med / base
        pair = statistics.median(paired[name])
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"<= {target:g}x  {'PASS' if pair <= target else 'MISS'}"
        print(f"{name:32}{med:9.1f}{p90:9.1f}{ratio:7.2f}x{pair:7.2f}x  {verdict}")


def fuzz(n: int, procs: int, script: str, root: str) -> None:
    from helpers.hook_inputs import check, payloads, prepare
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from smllm.cli.demo import copy_example
    from smllm.harness.hook import HARNESSES, HOOKS, run_hook

    env = _env(root)
    os.environ.update(env)
    project = Path(root) / "fuzz-project"
    project.mkdir(parents=True)
    copy_example(str(project))
    os.chdir(project)
    prepare(project, env)

    found: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    examples: list[str] = []
    calls = 0
    slowest = 0.0
    saved: list[tuple[str, str, bytes]] = []

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(stdin=payloads(str(project)), harness=st.sampled_from(HARNESSES))
    def one(stdin: bytes, harness: str) -> None:
        nonlocal calls, slowest
        for hook in HOOKS:
            out, err = io.StringIO(), io.StringIO()
            t0 = time.monotonic()
            try:
                code = run_hook(harness, hook, stdin=stdin, stdout=out, stderr=err, environ={})
            except BaseException as exc:  # an exception escaping run_hook is a traceback
                code, err = -1, io.StringIO(f"Traceback: {exc!r}")
            seconds = time.monotonic() - t0
            slowest = max(slowest, seconds)
            o, e = out.getvalue(), err.getvalue()
            wrong = check(harness, hook, code, o, e, seconds)
            answers[_kind(code, o, e)] += 1
            calls += 1
            for kind in wrong:
                found[kind] += 1
                if len(examples) < 10:
                    examples.append(f"{kind}: {harness} {hook} {stdin[:100]!r}")
        if len(saved) < procs:
            saved.append((harness, HOOKS[len(saved) % 3], stdin))

    began = time.monotonic()
    one()
    took = time.monotonic() - began
    print(f"\n== fuzz: {calls} in-process hook calls ({n} payloads x 3 hooks) in {took:.0f} s ==")
    print("  answers: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())))
    _counts(found, slowest, examples)

    found.clear()
    examples.clear()

    def real(item: tuple[str, str, bytes]) -> tuple[list[str], float, str]:
        harness, hook, stdin = item
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                [script, "harness", "hook", harness, hook],
                input=stdin,
                cwd=project,
                env=env,
                capture_output=True,
                timeout=30,
            )
        except subprocess.TimeoutExpired:
            return ["hang"], 30.0, f"{harness} {hook} {stdin[:100]!r}"
        seconds = time.monotonic() - t0
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        return (
            check(harness, hook, proc.returncode, out, err, seconds),
            seconds,
            f"{harness} {hook} {stdin[:100]!r}",
        )

    slowest = 0.0
    with ThreadPoolExecutor(max_workers=4) as pool:
        for wrong, seconds, what in pool.map(real, saved):
            slowest = max(slowest, seconds)
            for kind in wrong:
                found[kind] += 1
                if len(examples) < 10:
                    examples.append(f"{kind}: {what}")
    print(f"\n== fuzz: {len(saved)} real processes of the installed script (4 at a time) ==")
    _counts(found, slowest, examples)


def _kind(code: int, out: str, err: str) -> str:
    """What a hook answered, for the fuzz's tally."""
    if code != 0:
        return "failed (exit 1)" if code == 1 else f"exit {code}"
    if out.startswith('{"decision":"block"'):
        return "block"
    if "additionalContext" in out:
        return "session text"
    return "runaway" if err.startswith("<smllm>") else "quiet {}"


def _counts(found: Counter[str], slowest: float, examples: list[str]) -> None:
    kinds = (
        "traceback",
        "hang",
        "stdout on failure",
        "non-JSON stdout",
        "failure without error:",
        "internal error",
        "stderr on success",
    )
    for kind in kinds:
        print(f"  {kind:26}{found.get(kind, 0):6}")
    for kind, count in sorted(found.items()):
        if kind not in kinds:
            print(f"  {kind:26}{count:6}")
    print(f"  slowest call: {slowest:.2f} s")
    for line in examples:
        print(f"  e.g. {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="timed runs of each hook (default 30)")
    ap.add_argument("--fuzz", type=int, default=10000, help="fuzz payloads (default 10000)")
    ap.add_argument(
        "--fuzz-procs", type=int, default=300, help="of those, run as real processes (300)"
    )
    ap.add_argument("--venv-cache", default=default_venv_cache(), help="regular install cache")
    args = ap.parse_args(argv)
    root = tempfile.mkdtemp(prefix="smllm-hook-bench-")
    try:
        python, how = regular_install(REPO, args.venv_cache, "smllm", "smllm.cli.main:main")
        if python is None:
            print(f"no regular install: {how}")
            return 0
        print(f"regular install: {how}")
        script = os.path.join(os.path.dirname(python), "smllm")
        if args.runs:
            speed(python, script, os.path.join(root, "speed"), args.runs)
        if args.fuzz:
            fuzz(args.fuzz, args.fuzz_procs, script, os.path.join(root, "fuzz"))
    finally:
        os.chdir(REPO)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
