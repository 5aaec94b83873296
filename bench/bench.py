"""smllm speed report: in-process fire, store growth, and the `session show` process.

    python bench/bench.py            # the full report (about half a minute)
    python bench/bench.py --quick    # fewer rounds, for CI (about 20 s, plus ~15 s when the
                                     # regular install's venv must be made: see below)
    python bench/bench.py --profile  # also cProfile the fire loop

A report, not a gate: it prints medians, p90s, ratios and a PASS/MISS line per target of the
speed requirement, and exits 0 whatever it measured (non-zero only if it crashes).

Targets (the project's speed requirement):
  1. in-process fire on an instance, with 100 paused and 10,000 completed instances in the
     store: median <= 1 ms;
  2. that time at 10,000 completed <= 1.5x the time at 100 completed;
  3. the whole `smllm session show KEY` process <= 2.5x `python -c pass`, run the same way
     (`python -m smllm …` vs `python -c pass`, warm machine cache, .pyc files written), judged
     on a regular install: `pip install --no-deps` of this tree (not editable; see
     report.regular_install) into a venv of its own, kept under --venv-cache keyed on the hash
     of the sources, so only a changed tree pays for making it (~10 s). The console script
     (`VENV/bin/smllm session show KEY`) and the dev venv's editable install are shown too,
     for information: a venv that shares the host's site-packages runs its .pth files at
     every start-up, which pads the baseline;
  4. (checked by tests/test_hook_imports.py, shown here too) a warm `session show` imports no
     yaml, jsonschema, tomlkit, mcp, psycopg, tokenizers or CLI framework.

Also shown: the device flushes of an accepted fire, counted by strace where it is installed
(engine.md §10: one, the instance store's; the user store commits with synchronous=NORMAL),
in process and as a whole `smllm fire` process; and, to tell where time goes, a fire taken
apart by phase, the engine alone, the same fire with the stores on tmpfs (fdatasync free),
enter/pause, views, the process in layers (bare interpreter, + the stdlib modules smllm loads,
+ smllm's modules) and the top imports by `-X importtime`.

Everything runs in a throw-away folder (XDG_STATE_HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME and
HOME inside it); the stores are filled by writing the library's own records straight into
their tables. Stdlib and smllm only.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import os
import platform
import pstats
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

#: what a warm `session show` must not import (top-level package names)
# the one list of modules the hook path must not import lives in tests/helpers/imported_modules.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from fill import populate, store_counts
from helpers.imported_modules import FORBIDDEN
from report import (
    MARK,
    Ratios,
    Stats,
    cached_bytecode_env,
    fdatasync_ms,
    fs_type,
    heading,
    import_report,
    layers,
    loaded_modules,
    process_block,
    regular_install,
    site_pth_files,
    strace_syncs,
    timed,
    tmpfs_dir,
    verdict,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRE_MEDIAN_MS = 1.0
GROWTH_RATIO = 1.5
PROCESS_RATIO = 2.5

# -- the isolated environment ---------------------------------------------------------------------


@contextlib.contextmanager
def isolated(parent: str | None, keep: bool) -> Iterator[tuple[str, dict[str, str]]]:
    """A temp folder holding the XDG folders; os.environ points at them while inside."""
    from smllm.cli.demo import throwaway

    with throwaway("smllm-bench-", parent, keep) as (root, env):
        yield root, env
        if keep:
            print(f"\n(kept {root})")


def make_project(root: str, name: str) -> str:
    from smllm.cli.demo import copy_example

    folder = os.path.join(root, name)
    os.makedirs(folder)
    copy_example(folder)
    return folder


class Setup(NamedTuple):
    name: str
    project: str
    app: Any
    key: str  # a session holding an active instance (ref GH-0)
    store_path: str


def make_setup(name: str, project: str, paused: int, completed: int) -> Setup:
    from smllm.api.app import App

    t_ms, store_path = timed(lambda: populate(project, paused, completed, start=1))
    app = App(cwd=project)
    params = (("stateMachine", "dev"), ("issueId", "GH-0"))
    result = app.fire(None, "enter", params)
    assert result.ok and result.session is not None, result.text()
    print(f"  {name:<14} {store_counts(store_path)}  (filled in {t_ms / 1000:.2f} s)")
    return Setup(name, project, app, result.session.key, store_path)


def fire_loop(s: Setup, event: str, n: int, out: list[float]) -> None:
    app, key = s.app, s.key
    for _ in range(n):
        t0 = time.perf_counter_ns()
        result = app.fire(key, event, ())
        out.append((time.perf_counter_ns() - t0) / 1e6)
        if not result.ok:
            raise RuntimeError(f"{event} refused:\n{result.text()}")


def interleaved(setups: list[Setup], event: str, total: int, block: int) -> dict[str, list[float]]:
    """`total` fires per setup, alternating in blocks so drift hits every setup alike."""
    times: dict[str, list[float]] = {s.name: [] for s in setups}
    for s in setups:  # warm-up: caches, connections, first-call imports
        fire_loop(s, event, 10, [])
    done = 0
    while done < total:
        step = min(block, total - done)
        for s in setups:
            fire_loop(s, event, step, times[s.name])
        done += step
    return times


def engine_alone(s: Setup, n: int) -> list[float]:
    """`engine.fire.fire` of a yield with one reader (connection open), no commit."""
    from smllm.api.stores import Stores
    from smllm.engine.fire import Call, fire

    app = s.app
    session = app.session(s.key)
    loaded = app.load(session.configs)
    stores = Stores(loaded, app.user)
    call = Call("yield", (), "agent", session, "none", app.cwd, session.configs)
    for _ in range(10):
        fire(loaded, call, stores, app.host)
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        outcome = fire(loaded, call, stores, app.host)
        out.append((time.perf_counter_ns() - t0) / 1e6)
    assert outcome.ok
    return out


def phases(s: Setup, n: int) -> dict[str, list[float]]:
    """App.fire(yield) taken apart: where a call's time goes."""
    from smllm.api.stores import Stores
    from smllm.engine.fire import Call, fire

    app = s.app
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "read session",
            "load_cached",
            "engine (+ open store)",
            "commit instance",
            "commit session",
        )
    }
    for _ in range(n):
        t_a, session = timed(lambda: app.session(s.key))
        t_b, loaded = timed(lambda: app.load(session.configs))  # noqa: B023
        stores = Stores(loaded, app.user)
        call = Call("yield", (), "agent", session, "none", app.cwd, session.configs)
        t_c, outcome = timed(lambda: fire(loaded, call, stores, app.host))  # noqa: B023
        store = stores.store_of("dev")
        assert store is not None and outcome.ok and outcome.session is not None
        t_d, _ = timed(lambda: store.commit_instances(outcome.instances))  # noqa: B023
        t_e, _ = timed(lambda: app.user.commit_session(outcome.session, outcome.audit))  # noqa: B023
        for k, v in zip(out, (t_a, t_b, t_c, t_d, t_e), strict=True):
            out[k].append(v)
    return out


def pause_enter(s: Setup, n: int) -> tuple[list[float], list[float]]:
    """pause (idle list: reads the paused list) then enter GH-0 again (continue)."""
    app, key = s.app, s.key
    again = (("stateMachine", "dev"), ("issueId", "GH-0"))
    pauses, enters = [], []
    for i in range(n + 3):
        t_p, r1 = timed(lambda: app.fire(key, "pause", ()))
        t_e, r2 = timed(lambda: app.fire(key, "enter", again))
        if not (r1.ok and r2.ok):
            raise RuntimeError(f"pause/enter refused:\n{r1.text()}\n{r2.text()}")
        if i >= 3:
            pauses.append(t_p)
            enters.append(t_e)
    return pauses, enters


def view_loop(s: Setup, n: int) -> list[float]:
    out = []
    for _ in range(n + 5):
        t, _ = timed(lambda: s.app.view(s.key).text())
        out.append(t)
    return out[5:]


def profile_fire(s: Setup, n: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fire_loop(s, "yield", n, [])
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
    print(buf.getvalue())


# -- process timing -------------------------------------------------------------------------------


# -- device flushes -------------------------------------------------------------------------------

#: run under strace: a fresh project's first instance, warmed up, then one accepted fire and
#: `argv[2]` more, each part between marks (opens that fail); prints the session's key
_FLUSH_PROBE = f"""\
import sys
from smllm.api.app import App
def mark(name):
    try:
        open({MARK!r} + name)
    except OSError:
        pass
app = App(cwd=sys.argv[1])
r = app.fire(None, "enter", (("stateMachine", "dev"), ("issueId", "GH-1")))
assert r.ok and r.session is not None, r.text()
for _ in range(5):
    assert app.fire(r.session.key, "yield").ok
mark("one")
assert app.fire(r.session.key, "yield").ok
mark("more")
for _ in range(int(sys.argv[2])):
    assert app.fire(r.session.key, "yield").ok
mark("end")
print(r.session.key)
"""


def _flush_text(counts: Counter[str], user_dir: str, per: int = 1) -> str:
    """`1 (instance WAL 1)`: the flushes, by store and file, divided by `per` fires."""
    named: Counter[str] = Counter()
    for path, n in counts.items():
        who = "user" if path.startswith(user_dir) else "instance"
        what = "WAL" if path.endswith("-wal") else "db" if path.endswith(".db") else "folder"
        named[f"{who} {what}"] += n
    total = sum(named.values())
    head = f"{total}" if per == 1 else f"{total / per:.2f} per fire ({total} in {per})"
    return f"{head} ({', '.join(f'{k} {v}' for k, v in sorted(named.items())) or 'none'})"


def flushes(root: str, env: dict[str, str], fires: int) -> int | None:
    """Print the device flushes (fsync/fdatasync) of accepted fires, counted by strace: one
    in-process fire with the stores' connections open, `fires` more, and one whole `smllm fire`
    process. Returns the first count, or None where strace can't run."""
    project = make_project(root, "flush")
    # a state folder of its own: no connection of this process keeps its user store open
    # (which would spare the probe's processes the checkpoint at their last close)
    env = {**env, "XDG_STATE_HOME": os.path.join(root, "flush-state")}
    user_dir = os.path.join(env["XDG_STATE_HOME"], "smllm")
    log = os.path.join(root, "strace.log")
    probe = [sys.executable, "-c", _FLUSH_PROBE, project, str(fires)]
    parts, out = strace_syncs(probe, project, env, log)
    if parts is None:
        print(f"  not counted: {out}")
        return None
    one = sum(parts["one"].values())
    print(f"  one accepted fire, in process: {_flush_text(parts['one'], user_dir)}")
    print(f"  {fires} more: {_flush_text(parts['more'], user_dir, fires)}")
    argv = [sys.executable, "-m", "smllm", "fire", "--session", out.strip(), "yield"]
    for _ in range(2):  # the second: the first one may build the machine cache
        cli, why = strace_syncs(argv, project, env, log)
    if cli is None:
        print(f"  a whole `smllm fire` process: not counted: {why}")
    else:
        print(f"  a whole `smllm fire` process: {_flush_text(cli[''], user_dir)}")
        print(
            "    (each process's connections are new: a first commit syncs the WAL's header "
            "and its folder, the last close checkpoints and removes the WAL)"
        )
    return one


# -- the report -----------------------------------------------------------------------------------


def fire_medians(setups: list[Setup], fires: int) -> dict[str, Stats]:
    gc.collect()
    times = interleaved(setups, "yield", fires, block=max(10, fires // 10))
    return {k: Stats.of(v) for k, v in times.items()}


def default_venv_cache() -> str:
    """Where the regular install's venv is kept: the user's cache (not the throw-away one)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "smllm-bench")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (CI)")
    ap.add_argument("--fires", type=int, default=None, help="fires per store (default 300)")
    ap.add_argument("--runs", type=int, default=None, help="process runs each (default 30)")
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--profile", action="store_true", help="cProfile the fire loop (10k store)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    ap.add_argument(
        "--venv-cache",
        default=default_venv_cache(),
        help="keep the regular install's venv here (default: %(default)s)",
    )
    args = ap.parse_args(argv)

    fires = args.fires or (100 if args.quick else 300)
    runs = args.runs or (10 if args.quick else 30)
    side = max(20, fires // 3)
    started = time.perf_counter()

    import smllm

    print("smllm speed report" + (" (--quick)" if args.quick else ""))
    print(
        f"  smllm {smllm.__version__}  python {platform.python_version()}  "
        f"sqlite {sqlite3.sqlite_version}  {platform.system()} {platform.machine()}  "
        f"cpus {os.cpu_count()}"
    )
    with contextlib.suppress(OSError):
        print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (noise)")

    with isolated(args.dir, args.keep) as (root, env):
        sync = fdatasync_ms(root, 50)
        print(f"  temp folder {root} on {fs_type(root)}")
        print(
            f"  4 KiB write + fdatasync there: median {sync.median:.3f} ms, p90 {sync.p90:.3f} ms"
            " (an accepted fire waits for one: the instance store's commit)"
        )

        heading("stores")
        small = make_setup("100 completed", make_project(root, "small"), 100, 100)
        big = make_setup("10k completed", make_project(root, "big"), 100, 10_000)

        heading(f"in-process App.fire(key, 'yield') — {fires} fires per store, interleaved")
        fire_stats = fire_medians([small, big], fires)
        for name, st in fire_stats.items():
            print(f"  {name:<14} {st.line()}")
        growth = fire_stats[big.name].median / fire_stats[small.name].median
        print(f"  ratio 10k / 100 (medians): {growth:.2f}x")

        heading("device flushes (fsync, fdatasync) of accepted fires, by strace")
        flush_one = flushes(root, cached_bytecode_env(env, root), side)

        heading(f"where a fire's time goes (10k store, {side} fires, medians)")
        parts = {k: Stats.of(v) for k, v in phases(big, side).items()}
        for name, st in parts.items():
            print(f"  {name:<22} {st.median:8.3f} ms   p90 {st.p90:8.3f} ms")
        print(f"  {'sum of medians':<22} {sum(p.median for p in parts.values()):8.3f} ms")
        for s in (small, big):
            st = Stats.of(engine_alone(s, fires))
            print(f"  engine alone, {s.name:<14} {st.line()}")

        heading(f"enter (continue a paused instance) and pause — {side} rounds per store")
        for s in (small, big):
            p, e = pause_enter(s, side)
            print(f"  {s.name:<14} pause: {Stats.of(p).line()}")
            print(f"  {'':<14} enter: {Stats.of(e).line()}")

        heading(f"in-process App.view(key) — {side} views")
        for s in (small, big):
            print(f"  {s.name:<14} {Stats.of(view_loop(s, side)).line()}")

        if args.profile:
            heading("cProfile of the fire loop (10k store)")
            profile_fire(big, fires)

        shm = tmpfs_dir(root)
        if shm is not None:
            heading("the same 10k fire with every store on tmpfs (fdatasync costs nothing there)")
            with isolated(shm, False) as (shm_root, _):
                fast = make_setup("10k on tmpfs", make_project(shm_root, "big"), 100, 10_000)
                st = fire_medians([fast], fires)[fast.name]
                print(f"  {fast.name:<14} {st.line()}")
                cost = fire_stats[big.name].median - st.median
                print(f"  so the synced commit costs ~{cost:.3f} ms of the 10k fire's median")
                fast.app.user.close()

        py = sys.executable
        warm = cached_bytecode_env(env, root)
        heading(f"processes — median of {runs} runs each, interleaved, warm machine cache")
        show = ["smllm", "session", "show", big.key]
        reg_python, how = regular_install(REPO, args.venv_cache, "smllm", "smllm.cli.main:main")
        regular: dict[str, Ratios] = {}
        # a regular install reads (and, if missing, writes) the .pyc files beside its modules
        plain = {k: v for k, v in warm.items() if k != "PYTHONPYCACHEPREFIX"}
        if reg_python is not None:
            regular = process_block(
                f"a regular install — the target ({how})",
                reg_python,
                show,
                big.project,
                plain,
                runs,
                os.path.join(os.path.dirname(reg_python), "smllm"),
            )
        else:
            print(f"  no regular install: {how}")
        src = os.path.dirname(os.path.dirname(os.path.abspath(smllm.__file__)))
        kind = "an editable install" if "site-packages" not in src else "installed"
        editable = process_block(
            f"this interpreter: {kind} (smllm from {src}; {len(site_pth_files())} .pth files "
            "in its site-packages), .pyc cached",
            py,
            show,
            big.project,
            warm,
            runs,
        )
        if env.get("PYTHONDONTWRITEBYTECODE"):
            process_block(
                "as inherited: PYTHONDONTWRITEBYTECODE is set, so every run compiles smllm",
                py,
                show,
                big.project,
                env,
                max(5, runs // 3),
            )

        lean, lean_env = (reg_python, plain) if reg_python else (py, warm)
        where = "the regular install" if reg_python else "this interpreter"
        heading(f"the session show process in layers ({where}, {max(5, runs // 2)} runs each)")
        layers(lean, show, big.project, lean_env, max(5, runs // 2))

        heading(f"-X importtime -m smllm session show KEY ({where}) — top 15 cumulative")
        import_report(lean, show, big.project, lean_env, 15)
        # this interpreter has yaml, jsonschema, … installed, so a stray import would succeed
        mods = loaded_modules(py, show, big.project, warm)
        bad = sorted(m for m in mods if m.split(".")[0] in FORBIDDEN)
        print(
            f"  sys.modules of a warm session show in this interpreter: {len(mods)} modules; "
            f"forbidden: {', '.join(bad) if bad else 'none'}"
        )

        heading("summary")
        fire_big = fire_stats[big.name].median
        rows: list[tuple[str, str, bool | None]] = [
            (
                f"fire median, 100 paused + 10k completed <= {FIRE_MEDIAN_MS:g} ms",
                f"{fire_big:.3f} ms",
                fire_big <= FIRE_MEDIAN_MS,
            ),
            (
                "fire median, 100 paused + 100 completed",
                f"{fire_stats[small.name].median:.3f} ms",
                None,
            ),
            (
                f"fire at 10k completed <= {GROWTH_RATIO:g}x fire at 100",
                f"{growth:.2f}x",
                growth <= GROWTH_RATIO,
            ),
            (
                "an accepted in-process fire flushes the device once",
                "not counted" if flush_one is None else str(flush_one),
                None if flush_one is None else flush_one == 1,
            ),
        ]
        target = f"session show <= {PROCESS_RATIO:g}x python -c pass"
        for what, got, name, judged in (
            (f"{target}: regular, -m", regular, "python -m smllm session show", True),
            ("  the same: regular, console script", regular, "smllm session show (script)", False),
            (
                "  the same: editable (this venv), -m",
                editable,
                "python -m smllm session show",
                False,
            ),
        ):
            r = got.get(name)
            ok = (r is not None and r.wall <= PROCESS_RATIO) if judged else None
            rows.append((what, r.text() if r is not None else "failed", ok))
        rows.append(
            ("warm session show imports no forbidden module", ", ".join(bad) or "none", not bad)
        )
        for what, text, ok in rows:
            print(f"  {verdict(ok):<4}  {what:<58} {text}")
        print(f"  (report took {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
