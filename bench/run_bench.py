"""smllm run report (issue 22): the run's own time per turn around the model, and the ids fed
per turn.

    python bench/run_bench.py            # the full report (8 runs of 50 turns a case, ~15 s)
    python bench/run_bench.py --quick    # 3 runs a case, for CI (~8 s on 2 cores)
    python bench/run_bench.py --profile  # also cProfile one run of case A: where the time goes

A report, not a gate: it prints medians, p90s and maxima and a PASS/MISS line per target, and
exits 0 whatever it measured (non-zero only if it crashes, or a run doesn't end as scripted).

Targets (issue 22, Speed):
  1. the per-turn overhead of `smllm run` around the model (fire, render, compile, parse, CAPS)
     with the scripted backend, the store holding 100 paused and 10,000 completed `dev`
     instances: median <= 5 ms;
  2. the ids fed per turn flat over 50 turns, and >= 10x fewer at turn 50 than re-encoding the
     whole conversation up to that turn.

Each run is `smllm.drive.run` in process (what `smllm run dev --ref GH-n --backend
scripted:FILE` does, a new session entering the example machine), with a 50-turn script:
  A. the example machine as shipped: `planned` 49 times while PLAN.md is absent (its guard
     `test -f PLAN.md` runs, a process, and is false: PLAN is re-entered, the ACT accepted),
     then `yield`. The offered events never change, so turns 2..50 carry no CAPS;
  B. no guard and a new CAPS every turn: `unmatched` and `resume` by turns (idle's offer, then
     PLAN's), 49 turns, then a transmission without ACT: a stop the engine allows in idle.
A turn here runs from one call of the model (`ScriptModel.generate_turn`) to the next (the
last one: to the run's summary), so it holds the turn's parse, its ACT fired through the
library, the transcript, the new view and CAPS, and the next transmission's compile; its
overhead is that time less the model's call. The functions the run spends it in are timed
(exclusive of each other) to say where it goes. The store lives in a throw-away folder on
$TMPDIR (--dir): its commits wait for that disk; case A runs once more on tmpfs, for scale.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import isolated, make_project
from fill import populate, store_counts
from report import fs_type, heading, tmpfs_dir, verdict

PAUSED, COMPLETED = 100, 10_000
TURNS = 50
OVERHEAD_MS = 5.0
REENCODE_RATIO = 10.0
#: flat: the ids fed per turn (turns 2..50 carrying no new CAPS) vary by at most this factor
FLAT_SPREAD = 1.1

#: where a turn's time goes: (module, owner, attribute, part), timed exclusive of each other
PARTS = [
    ("smllm.drive.scripted", "ScriptModel", "generate_turn", "model"),
    ("smllm.smi.runtime.session", "Runtime", "compile", "compile"),
    # the runtime's ids loop less the model: the parser, the budget's replay of the ids, and
    # each parser event handed from the model's thread to the run's loop
    ("smllm.smi.runtime.session", None, "generate", "parse, budget replay, per-id events"),
    ("smllm.smi.caps.check", "Capabilities", "from_payloads", "CAPS check (smi, a new CAPS)"),
    ("smllm.smi.caps.answer", "Ledger", "admit", "ACT admission (smi)"),
    ("smllm.api.app", "App", "fire", "fire"),
    ("smllm.api.system", "SystemHost", "run_command", "guard process"),
    ("smllm.api.app", "App", "view", "view"),
    ("smllm.api.app", "App", "stop", "stop"),
    ("smllm.api.app", "Result", "text", "render"),
    ("smllm.drive.loop", None, "caps_value", "caps"),
    ("smllm.drive.transcript", "Transcript", "turn", "transcript"),
    ("smllm.drive.transcript", "Transcript", "tail", "transcript"),
]


def act(n: int, name: str, **arguments: Any) -> list[dict[str, Any]]:
    call = {"id": f"a{n}", "type": "tool", "name": name, "arguments": arguments}
    return [{"type": "act", "json": call}]


def script_a() -> list[list[dict[str, Any]]]:
    return [act(n, "planned", size="small") for n in range(1, TURNS)] + [act(TURNS, "yield")]


def script_b() -> list[list[dict[str, Any]]]:
    turns = [act(n, "unmatched" if n % 2 else "resume") for n in range(1, TURNS)]
    return [*turns, [{"type": "out", "text": "That is all for now."}]]


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    script: Callable[[], list[list[dict[str, Any]]]]
    stop: str  # how each run must end


CASES = [
    Case("A", "planned with its guard false 49x, then yield", script_a, "yield"),
    Case("B", "unmatched/resume by turns (a new CAPS each turn), then a stop", script_b, "idle"),
]


# -- timing the run's parts ------------------------------------------------------------------------


@dataclass
class Meter:
    """The model calls' times, and each part's exclusive time by the turn it fell in (turn n:
    from the nth model call to the next)."""

    starts: list[int] = field(default_factory=list)  # ns, each model call's start
    cpu_starts: list[int] = field(default_factory=list)  # the process's CPU time then
    model_ns: list[int] = field(default_factory=list)
    end: int = 0  # ns, the run's summary: the last turn's end
    cpu_end: int = 0
    parts: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    _local: threading.local = field(default_factory=threading.local)

    def timed(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            stack: list[list[int]] = self._local.__dict__.setdefault("stack", [])
            frame = [0]  # the time of the timed calls inside this one
            stack.append(frame)
            t0 = time.perf_counter_ns()
            if part == "model":
                self.starts.append(t0)
                self.cpu_starts.append(time.process_time_ns())
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter_ns() - t0
                stack.pop()
                if stack:
                    stack[-1][0] += spent
                if part == "model":
                    self.model_ns.append(spent)
                turn = len(self.starts)  # 0: before the first model call (the run's start)
                bucket = self.parts[turn]
                bucket[part] = bucket.get(part, 0) + spent - frame[0]

        return wrapper

    def overheads(self) -> list[float]:
        """Each turn's time less its model call, ms."""
        ends = [*self.starts[1:], self.end]
        return [(e - s - m) / 1e6 for s, e, m in zip(self.starts, ends, self.model_ns, strict=True)]

    def cpu(self) -> list[float]:
        """Each turn's CPU time in this process (all its threads; not the guard's process),
        less its model call, ms: what the wall time would be on an idle machine, but for the
        waits (disk, child processes)."""
        ends = [*self.cpu_starts[1:], self.cpu_end]
        pairs = zip(self.cpu_starts, ends, self.model_ns, strict=True)
        return [max(0.0, (e - s - m) / 1e6) for s, e, m in pairs]


@contextmanager
def metered(meter: Meter) -> Iterator[None]:
    """The run's parts (PARTS) timed into `meter` while inside."""
    import importlib

    from smllm.drive.loop import Run
    from smllm.drive.report import Summary

    saved: list[tuple[Any, str, Any]] = []
    targets = [(importlib.import_module(m), owner, attr, part) for m, owner, attr, part in PARTS]
    summary = Run.summary

    def at_summary(run: Run, stop: str, message: str) -> Summary:
        meter.end = time.perf_counter_ns()
        meter.cpu_end = time.process_time_ns()
        return summary(run, stop, message)

    patches: list[tuple[Any, str, Any]] = [(Run, "summary", at_summary)]
    for module, owner, attr, part in targets:
        where = getattr(module, owner) if owner else module
        raw = where.__dict__[attr]
        if isinstance(raw, classmethod):
            patches.append((where, attr, classmethod(meter.timed(part, raw.__func__))))
        else:
            patches.append((where, attr, meter.timed(part, raw)))
    try:
        for where, attr, value in patches:
            saved.append((where, attr, where.__dict__[attr]))
            setattr(where, attr, value)
        yield
    finally:
        for where, attr, value in reversed(saved):
            setattr(where, attr, value)


# -- the runs --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    overheads: list[float]
    cpu: list[float]
    model_ms: list[float]
    parts: dict[str, float]  # ms per turn, mean over the turns
    turns: list[dict[str, Any]]  # the turns file's lines
    conversation: str  # the run's smi.jsonl


def play(project: str, script: str, ref: str, case: Case) -> Outcome:
    """One scripted run of 50 turns in `project`, timed."""
    from smllm.drive import RunOptions, run

    meter = Meter()
    options = RunOptions(machine="dev", ref=ref, script=script, max_turns=TURNS + 5)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        with metered(meter):
            summary = run(options, out=io.StringIO(), live=False)
    finally:
        os.chdir(cwd)
    if summary.stop != case.stop or summary.totals.turns != TURNS or not summary.transcript:
        raise RuntimeError(
            f"case {case.name}: the run ended {summary.stop!r} after {summary.totals.turns} "
            f"turns ({summary.message}); the bench expects {case.stop!r} after {TURNS}"
        )
    with open(summary.transcript, encoding="utf-8") as f:
        turns = [json.loads(line) for line in f]
    totals: dict[str, int] = defaultdict(int)
    for turn in range(1, TURNS + 1):
        for part, ns in meter.parts.get(turn, {}).items():
            totals[part] += ns
    return Outcome(
        meter.overheads(),
        meter.cpu(),
        [ns / 1e6 for ns in meter.model_ns],
        {part: ns / 1e6 / TURNS for part, ns in totals.items()},
        turns,
        summary.transcript.replace(".turns.jsonl", ".smi.jsonl"),
    )


def play_case(project: str, case: Case, runs: int, first_ref: int) -> list[Outcome]:
    path = os.path.join(os.path.dirname(project), f"script-{case.name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"transmissions": case.script()}, f)
    return [play(project, path, f"GH-{first_ref + n}", case) for n in range(runs)]


def filled_project(root: str, name: str) -> str:
    project = make_project(root, name)
    path = populate(project, PAUSED, COMPLETED, start=1)
    print(f"  {name}: {store_counts(path)}; on {fs_type(path)}")
    return project


# -- the report ------------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    s = sorted(values)
    p90 = s[max(0, math.ceil(0.9 * len(s)) - 1)]
    return (
        f"median {statistics.median(s):7.2f} ms   p90 {p90:7.2f} ms   max {s[-1]:7.2f} ms   "
        f"(n={len(s)})"
    )


def overhead_report(case: Case, outcomes: list[Outcome], where: str) -> float:
    """Print a case's overhead per turn and where it goes; its median (ms)."""
    overheads = [ms for o in outcomes for ms in o.overheads]
    model = [ms for o in outcomes for ms in o.model_ms]
    print(f"  case {case.name} ({where}): {case.title}; {len(outcomes)} runs of {TURNS} turns")
    print(f"    overhead per turn     {spread(overheads)}")
    print(f"    its CPU (no waits)    {spread([ms for o in outcomes for ms in o.cpu])}")
    print(f"    the model's call      {spread(model)}")
    parts: dict[str, float] = defaultdict(float)
    for o in outcomes:
        for part, ms in o.parts.items():
            parts[part] += ms / len(outcomes)
    total = statistics.fmean(overheads)
    named = {p: ms for p, ms in parts.items() if p != "model"}
    named["other (asyncio, the report, the turn's checks, ...)"] = total - sum(named.values())
    print(f"    where it goes (mean ms per turn, of {total:.2f}):")
    for part, ms in sorted(named.items(), key=lambda item: -item[1]):
        print(f"      {part:<52} {ms:6.2f}  {100 * ms / total:4.0f} %")
    return statistics.median(overheads)


def fed_report(case: Case, outcome: Outcome) -> tuple[bool, float]:
    """Print the ids fed per turn and the re-encoding at turn 50; (flat, ratio)."""
    from smllm.drive.bytevocab import BYTE_IDS, ByteEncoder
    from smllm.smi.compile import Compiler
    from smllm.smi.convert import from_native, to_native

    fed = [len(t["fed"]) for t in outcome.turns]
    with_caps = [n for n, t in enumerate(outcome.turns[1:], 2) if _has_caps(t)]
    plain = [fed[n - 1] for n in range(2, TURNS + 1) if n not in with_caps]
    caps_fed = [fed[n - 1] for n in with_caps]
    with open(outcome.conversation, encoding="utf-8") as f:
        conversation = from_native(json.loads(f.read()))
    # a stateless model re-encodes every transmission up to turn 50's runtime one
    upto = conversation[: 2 * TURNS - 1]
    if to_native(upto[-1:])["transmissions"][0] != outcome.turns[-1]["runtime"]:
        raise RuntimeError(
            f"{outcome.conversation}: its transmission {2 * TURNS - 1} is not turn "
            f"{TURNS}'s runtime one: the conversation file's order changed"
        )
    whole = len(Compiler(ByteEncoder(), BYTE_IDS).compile(upto).ids)
    ratio = whole / fed[-1]
    flat = bool(plain) and max(plain) <= FLAT_SPREAD * min(plain)
    print(f"  case {case.name}: turn 1 fed {fed[0]} ids (CTRL, SYS, CAPS, USR)")
    if plain:
        print(
            f"    turns 2..{TURNS} without a new CAPS ({len(plain)}): min {min(plain)}   median "
            f"{statistics.median(plain):.0f}   max {max(plain)} ids   (turn 2: {fed[1]}, turn "
            f"{TURNS}: {fed[-1]})"
        )
    if caps_fed:
        print(
            f"    turns 2..{TURNS} with a new CAPS ({len(caps_fed)}): min {min(caps_fed)}   "
            f"median {statistics.median(caps_fed):.0f}   max {max(caps_fed)} ids"
        )
    print(
        f"    turn {TURNS}: {fed[-1]} ids fed; re-encoding the conversation up to it: {whole} ids "
        f"({ratio:.1f}x); all ids fed over the {TURNS} turns: {sum(fed)}"
    )
    return flat, ratio


def _has_caps(turn: dict[str, Any]) -> bool:
    return any(block.get("type") == "caps" for block in turn["runtime"])


def profile(project: str, case: Case, ref: str) -> None:
    """cProfile one run of `case`: the functions the time goes to."""
    path = os.path.join(os.path.dirname(project), f"script-{case.name}.json")
    profiler = cProfile.Profile()
    profiler.enable()
    play(project, path, ref, case)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"smllm/(drive|api|engine|store|smi)", 30)
    stats.sort_stats("tottime").print_stats(15)
    print(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 runs a case (CI)")
    ap.add_argument("--runs", type=int, default=None, help="runs of 50 turns a case (default 8)")
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--profile", action="store_true", help="cProfile one run of case A")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 8)
    print(
        "smllm run report: the run's overhead per turn, and the ids fed per turn"
        + (" (--quick)" if args.quick else "")
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(
        f"  {os.cpu_count()} CPUs, load average {load} (other work on the machine pads wall times)"
    )
    heading(f"the stores: {PAUSED} paused and {COMPLETED:,} completed dev instances")
    with isolated(args.dir, args.keep) as (root, _env):
        projects = {case.name: filled_project(root, f"case-{case.name}") for case in CASES}
        results = {case.name: play_case(projects[case.name], case, runs, 100_000) for case in CASES}
        heading(f"target 1: overhead per turn around the model <= {OVERHEAD_MS:g} ms (median)")
        medians = {
            case.name: overhead_report(case, results[case.name], fs_type(root)) for case in CASES
        }
        shm = tmpfs_dir(root)
        if shm is not None:
            with isolated(shm, False) as (fast_root, _):
                fast = filled_project(fast_root, "case-A-tmpfs")
                outcomes = play_case(fast, CASES[0], runs, 200_000)
                overhead_report(CASES[0], outcomes, "tmpfs, for scale: commits wait for no disk")
        for name, median in medians.items():
            ok = median <= OVERHEAD_MS
            print(f"  {verdict(ok)}  case {name}: median {median:.2f} ms (target {OVERHEAD_MS:g})")
        heading(
            f"target 2: ids fed per turn flat over {TURNS} turns, >= {REENCODE_RATIO:g}x "
            "fewer than re-encoding"
        )
        found = {case.name: fed_report(case, results[case.name][0]) for case in CASES}
        flat, ratio = found["A"]
        ok = flat and ratio >= REENCODE_RATIO
        print(
            f"  {verdict(ok)}  case A: turns 2..{TURNS} {'within' if flat else 'NOT within'} "
            f"{FLAT_SPREAD:g}x of each other, {ratio:.1f}x fewer than re-encoding at turn {TURNS} "
            f"(target {REENCODE_RATIO:g}x)"
        )
        if args.profile:
            heading(
                "cProfile: one run of case A (the main thread; the model's thread is timed above)"
            )
            profile(projects["A"], CASES[0], "GH-300000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
