"""smllm validate report: a 50-machine project, cold and warm, and the compiled-machine cache.

    python bench/validate_bench.py            # the full report (about half a minute)
    python bench/validate_bench.py --quick    # fewer rounds, for CI (well under 20 s)
    python bench/validate_bench.py --fuzz     # also the loader fuzz test with 10,000 cases

A report, not a gate: it prints medians, p90s and a PASS/MISS line per target, and exits 0
whatever it measured (non-zero only if it crashes).

Targets:
  1. `python -m smllm validate` in a project whose config lists 50 machine files, with a warm
     compiled cache: median <= 1 s;
  2. an unchanged config reuses the compiled cache: a warm run rewrites nothing under
     $XDG_CACHE_HOME/smllm (every file keeps its inode, size and mtime), and takes at most
     half the time of a cold run (no cache: every file parsed and checked);
  3. touching one machine file (mtime only), then editing it, makes the next run rebuild: the
     cache file is written again, and the run after that is warm again;
  4. (--fuzz) tests/test_fuzz.py (machine files) and tests/test_fuzz_config.py (configs) pass
     with SMLLM_FUZZ_EXAMPLES=10000 each; shown with cases per second.

The project is generated in a throw-away folder (XDG_STATE_HOME, XDG_CACHE_HOME,
XDG_CONFIG_HOME and HOME inside it): 10 copies of tests/machines/fix (with its prompt files),
10 of the dev example, and 30 generated machines of 10 to 30 states with params (string and
JSON), command and visits guards, always routers, sharedActions, setRef, a fallback state,
prompt files and implied enter-STATE.md files. Every run is checked to exit 0 with no error.
Stdlib and smllm only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import NamedTuple

from report import Stats, heading, verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
FIX = os.path.join(TESTS, "machines", "fix")

WARM_MEDIAN_S = 1.0
WARM_VS_COLD = 0.5
FUZZ_EXAMPLES = 10_000
MACHINES = 50


# -- small helpers ------------------------------------------------------------------------------


@contextlib.contextmanager
def isolated(parent: str | None, keep: bool) -> Iterator[tuple[str, dict[str, str]]]:
    """A temp folder holding XDG_* and HOME; yields it and the environment for processes."""
    root = tempfile.mkdtemp(prefix="smllm-validate-bench-", dir=parent)
    env = dict(os.environ)
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME"):
        env[name] = os.path.join(root, name.lower())
        os.makedirs(env[name])
    env.pop("SMLLM_CONFIG", None)
    # .pyc files written and read (under the temp folder), as in a normal install
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(root, "pycache")
    # a checkout run without `pip install -e .` still finds smllm
    src = os.path.join(ROOT, "src")
    if os.path.isdir(os.path.join(src, "smllm")):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    try:
        yield root, env
    finally:
        if keep:
            print(f"\n(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


# -- the project --------------------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _renamed(text: str, new_id: str) -> str:
    return re.sub(r"(?m)^id: .*$", f"id: {new_id}", text, count=1)


def generated_machine(n: int, rng: random.Random, folder: str) -> str:
    """A machine of 10 to 30 states; its prompt files go to `folder`. Returns its YAML."""
    count = rng.randint(10, 30)
    steps = [f"S{i:02d}" for i in range(count - 3)]
    routers = set(rng.sample(steps[2:-2], k=min(3, len(steps) // 5)))
    extra = [f"e{k}" for k in range(rng.randint(1, 4))]
    extra_host = next(s for s in steps[1:] if s not in routers)  # the state offering them
    out = [
        f"id: gen-{n:02d}",
        f"description: Generated workflow {n}, {count} states.",
        "initial: S00",
        "meta:",
        "  smllm: 1",
        "  instance:",
        "    kind: task",
        '    ref: { param: taskId, pattern: "^T-[0-9]+$", description: "The task id, T-3." }',
        "  events:",
        "    start: { description: Fire with the task id to begin. }",
        "    next: { description: Fire when this step is done. }",
        "    back: { description: Fire to go back one step. }",
        "    finish: { description: Fire when the whole task is done. }",
        "    note:",
        "      description: Fire to record a note.",
        "      params:",
        "        type: object",
        "        properties:",
        '          text: { type: string, description: "The note." }',
        "          tags: { type: array, items: { type: string, enum: [a, b, c] } }",
        "          level: { type: integer, minimum: 1, maximum: 5 }",
        "          where: { $ref: '#/$defs/place' }",
        "        required: [text]",
        "        $defs:",
        "          place:",
        "            type: object",
        "            properties: { file: { type: string }, line: { type: integer } }",
        "            required: [file]",
    ]
    for e in extra:
        kind = rng.choice(["enum", "pattern", "json", "none"])
        out.append(f"    {e}:")
        out.append(f"      description: Extra event {e}.")
        if kind == "none":
            continue
        out += ["      params:", "        properties:"]
        if kind == "enum":
            out.append("          size: { enum: [small, medium, large] }")
        elif kind == "pattern":
            out.append('          branch: { pattern: "^[a-z][a-z0-9-]*$", description: "B." }')
        else:
            out.append("          files: { type: array, items: { type: string }, minItems: 1 }")
    shared_states = ", ".join(rng.sample(steps, k=min(4, len(steps))))
    out += [
        "  sharedActions:",
        f"    - states: [{shared_states}]",
        "      position: before",
        '      entry: { type: prompt, params: { text: "Keep the task log up to date." } }',
        f"    - states: [{steps[-1]}]",
        "      exit: [ { type: command, params: { run: [git, status], timeoutSecs: 20 } } ]",
        "states:",
    ]
    for i, name in enumerate(steps):
        nxt = steps[i + 1] if i + 1 < len(steps) else "DONE"
        out.append(f"  {name}:")
        if name in routers:
            out += [
                "    always:",
                f"      - {{ target: ASK, guard: {{ type: visits, params: {{ state: {name}, "
                "atLeast: 3 } } }",
                f"      - target: {nxt}",
            ]
            continue
        if i == 0:
            out.append("    meta: { entryPoint: true }")
        style = rng.choice(["text", "file", "implied"])
        if style == "text":
            out.append(
                f'    entry: {{ type: prompt, params: {{ text: "Do step {i} of the task." }} }}'
            )
        elif style == "file":
            out.append(f"    entry: {{ type: prompt, params: {{ file: prompts/{name}.md }} }}")
            _write(os.path.join(folder, "prompts", f"{name}.md"), f"Do step {i}.\n")
        else:
            _write(os.path.join(folder, f"enter-{name}.md"), f"Step {i}: read the notes.\n")
        out.append("    on:")
        if i == 0:
            out.append(f"      start: {{ target: {nxt}, actions: [setRef] }}")
            continue
        out += [
            "      next:",
            f"        - target: {nxt}",
            f'          guard: {{ type: command, params: {{ run: "test -f step-{i}.done", '
            "timeoutSecs: 30 } }",
            f"        - {{ target: {name}, reenter: true }}",
            f"      back: {steps[i - 1]}",
            '      note: { actions: { type: prompt, params: { text: "Noted." } } }',
        ]
        if name == extra_host:
            out += [f"      {e}: {name}" for e in extra]
        if i == len(steps) - 1:
            out.append("      finish: DONE")
    out += [
        "  ASK:",
        "    meta: { entryPoint: true }",
        '    entry: { type: prompt, params: { text: "Ask the user how to go on." } }',
        "    on:",
        f"      next: {steps[1]}",
        "  ASIDE:",
        "    meta: { fallback: true }",
        '    entry: { type: prompt, params: { text: "Handle the request, then fire resume." } }',
        "  DONE:",
        "    type: final",
        '    entry: { type: prompt, params: { text: "Summarise the task." } }',
    ]
    return "\n".join(out) + "\n"


def make_project(root: str) -> tuple[str, list[str]]:
    """The project folder and its machine files (absolute), listed in .smllm/config.toml."""
    project = os.path.join(root, "project")
    smllm_dir = os.path.join(project, ".smllm")
    os.makedirs(smllm_dir)
    import smllm.examples

    dev = os.path.join(os.path.dirname(smllm.examples.__file__), "dev", "dev.smllm.yaml")
    with open(dev, encoding="utf-8") as f:
        dev_text = f.read()
    with open(os.path.join(FIX, "fix.smllm.yaml"), encoding="utf-8") as f:
        fix_text = f.read()
    rng = random.Random(7)
    files: list[str] = []
    for n in range(MACHINES):
        if n < 10:
            folder = os.path.join(smllm_dir, "machines", f"fix{n:02d}")
            shutil.copytree(FIX, folder)
            path = os.path.join(folder, "fix.smllm.yaml")
            _write(path, _renamed(fix_text, f"fix-{n:02d}"))
        elif n < 20:
            path = os.path.join(smllm_dir, "machines", f"dev-{n:02d}.smllm.yaml")
            _write(path, _renamed(dev_text, f"dev-{n:02d}"))
        else:
            folder = os.path.join(smllm_dir, "machines", f"gen{n:02d}")
            path = os.path.join(folder, f"gen-{n:02d}.smllm.yaml")
            _write(path, generated_machine(n, rng, folder))
        files.append(path)
    listed = ", ".join(f'"{os.path.relpath(p, smllm_dir)}"' for p in files)
    _write(os.path.join(smllm_dir, "config.toml"), f"[machines]\nfiles = [{listed}]\n")
    return project, files


# -- running validate ---------------------------------------------------------------------------


class Run(NamedTuple):
    seconds: float
    code: int
    out: str
    err: str


def validate(project: str, env: dict[str, str], *extra: str) -> Run:
    argv = [sys.executable, "-m", "smllm", "validate", *extra]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    return Run(time.perf_counter() - start, proc.returncode, proc.stdout, proc.stderr)


def cache_folder(env: dict[str, str]) -> str:
    return os.path.join(env["XDG_CACHE_HOME"], "smllm")


def snapshot(folder: str) -> dict[str, tuple[int, int, int]]:
    """Every file under `folder`: (inode, size, mtime in ns)."""
    out: dict[str, tuple[int, int, int]] = {}
    for base, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with contextlib.suppress(OSError):
                st = os.stat(path)
                out[os.path.relpath(path, folder)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def changed(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]) -> str:
    """What differs between two snapshots, in words ('' when nothing)."""
    parts = []
    for name in sorted(set(before) | set(after)):
        if name not in before:
            parts.append(f"{name} written")
        elif name not in after:
            parts.append(f"{name} removed")
        elif before[name] != after[name]:
            parts.append(f"{name} rewritten")
    return "; ".join(parts)


def counts(run: Run) -> str:
    lines = run.out.strip().splitlines()
    return lines[-1] if lines else "(no output)"


# -- the fuzz run -------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*([0-9.]+)s call\s+\S*::(test_fuzz_\w+)", re.MULTILINE)


def fuzz(examples: int) -> tuple[bool, str, float, dict[str, float]]:
    """Run the machine-file and config fuzz tests with `examples` cases each: (passed, summary,
    wall s, seconds per fuzz test)."""
    env = dict(os.environ, SMLLM_FUZZ_EXAMPLES=str(examples))
    src = os.path.join(ROOT, "src")
    if os.path.isdir(os.path.join(src, "smllm")):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--durations=0",
        "--durations-min=0",
        os.path.join("tests", "test_fuzz.py"),
        os.path.join("tests", "test_fuzz_config.py"),
    ]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.strip().splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else proc.stderr.strip()[-200:]
    per_test = {m.group(2): float(m.group(1)) for m in _DURATION.finditer(proc.stdout)}
    if proc.returncode != 0:
        failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        summary += "".join(f"\n      {line}" for line in failed[:10])
    return proc.returncode == 0, summary, wall, per_test


# -- the report ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (CI): well under 20 s")
    ap.add_argument("--runs", type=int, default=None, help="warm runs (default 20)")
    ap.add_argument("--cold", type=int, default=None, help="cold runs (default 5)")
    ap.add_argument("--fuzz", action="store_true", help="run the fuzz test with 10,000 cases")
    ap.add_argument("--examples", type=int, default=FUZZ_EXAMPLES, help=argparse.SUPPRESS)
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args(argv)

    runs = args.runs or (5 if args.quick else 20)
    colds = args.cold or (2 if args.quick else 5)
    started = time.perf_counter()
    rows: list[tuple[str, str, bool | None]] = []

    import smllm

    print("smllm validate report" + (" (--quick)" if args.quick else ""))
    print(
        f"  smllm {smllm.__version__}  python {platform.python_version()}  "
        f"{platform.system()} {platform.machine()}  cpus {os.cpu_count()}"
    )
    with contextlib.suppress(OSError):
        print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (noise)")

    with isolated(args.dir, args.keep) as (root, env):
        project, files = make_project(root)
        cache = cache_folder(env)
        size = sum(os.path.getsize(p) for p in files)
        print(f"  project {project}: {len(files)} machine files, {size / 1024:.0f} KiB of YAML")

        # prime the .pyc files of the loader: a machine file named alone never uses the cache
        validate(project, env, files[0])

        heading(f"cold: no compiled cache ({colds} runs, the cache folder removed before each)")
        cold_times = []
        cold = Run(0.0, 0, "", "")
        for _ in range(colds):
            shutil.rmtree(cache, ignore_errors=True)
            cold = validate(project, env)
            cold_times.append(cold.seconds)
        cold_stats = Stats.of(cold_times)
        print(f"  {'cold':<6} {cold_stats.line(scale=1000, digits=1)}")
        print(f"  exit {cold.code}; {counts(cold)}")
        clean = cold.code == 0 and cold.err == ""
        if not clean:
            print(f"  stderr: {cold.err.strip()[:500]}")
            print("  " + "\n  ".join(cold.out.strip().splitlines()[:10]))
        rows.append((f"all {len(files)} machines validate with no error", counts(cold), clean))
        print(f"  cache folder: {', '.join(sorted(snapshot(cache))) or '(empty)'}")

        heading(f"warm: the compiled cache in place ({runs} runs)")
        warm_times = []
        before = snapshot(cache)
        rewrites = []
        for _ in range(runs):
            run = validate(project, env)
            warm_times.append(run.seconds)
            after = snapshot(cache)
            if changed(before, after):
                rewrites.append(changed(before, after))
            before = after
        warm = Stats.of(warm_times)
        print(f"  {'warm':<6} {warm.line(scale=1000, digits=1)}")
        ratio = warm.median / cold_stats.median
        print(f"  warm / cold (medians): {ratio:.2f}")
        print(f"  cache rewritten by a warm run: {rewrites[0] if rewrites else 'never'}")
        rows.append(
            (
                f"warm validate, {len(files)} machines: median <= {WARM_MEDIAN_S:g} s",
                f"{warm.median * 1000:.0f} ms (p90 {warm.p90 * 1000:.0f} ms)",
                warm.median <= WARM_MEDIAN_S,
            )
        )
        rows.append(
            (
                "unchanged config: warm runs rewrite no cache file",
                f"{len(rewrites)} of {runs} rewrote",
                not rewrites,
            )
        )
        rows.append(
            (
                f"warm median <= {WARM_VS_COLD:g}x cold median (cache reused)",
                f"{ratio:.2f}x ({cold_stats.median * 1000:.0f} ms cold)",
                ratio <= WARM_VS_COLD,
            )
        )

        heading("one machine file changes: the next run rebuilds, the one after is warm")
        target = files[-1]
        for what in ("touched (mtime + 1 s, same bytes)", "edited (a comment appended)"):
            before = snapshot(cache)
            if what.startswith("touched"):
                st = os.stat(target)
                os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            else:
                with open(target, "a", encoding="utf-8") as f:
                    f.write("# edited by the benchmark\n")
            rebuild = validate(project, env)
            after = snapshot(cache)
            again = validate(project, env)
            still = changed(after, snapshot(cache))
            diff = changed(before, after)
            print(
                f"  {what}: next run {rebuild.seconds * 1000:.0f} ms, cache: "
                f"{diff or 'unchanged'}; the run after {again.seconds * 1000:.0f} ms, cache: "
                f"{still or 'unchanged'}"
            )
            ok = bool(diff) and not still and rebuild.code == 0 and again.code == 0
            rows.append(
                (
                    f"one file {what.split(' ')[0]}: rebuilt once, then reused",
                    f"{rebuild.seconds * 1000:.0f} ms, then {again.seconds * 1000:.0f} ms",
                    ok,
                )
            )

    if args.fuzz:
        heading(f"fuzz: test_fuzz.py and test_fuzz_config.py, SMLLM_FUZZ_EXAMPLES={args.examples}")
        passed, summary, wall, per_test = fuzz(args.examples)
        for name, seconds in sorted(per_test.items()):
            print(f"  {name:<28} {seconds:7.1f} s")
        fuzz_s = sum(per_test.values())
        cases = 2 * args.examples  # machine files, then configs
        rate = cases / fuzz_s if fuzz_s else 0.0
        print(f"  {cases} cases in {fuzz_s:.1f} s of fuzz tests: {rate:.0f} cases/s")
        print(f"  both files: {wall:.1f} s; {summary}")
        rows.append(
            (f"fuzz tests pass with {args.examples} cases each", f"{rate:.0f} cases/s", passed)
        )

    heading("summary")
    for what, got, judged in rows:
        print(f"  {verdict(judged):<4}  {what:<58} {got}")
    print(f"  (report took {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
