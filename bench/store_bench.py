"""smllm store report: `fire` on PostgreSQL over loopback against SQLite, in the same run.

    python bench/store_bench.py            # the full report (a few minutes)
    python bench/store_bench.py --quick    # fewer rounds, for CI (well under a minute)

A report, not a gate: it prints medians, p99s and ratios, and exits 0 whatever it measured
(non-zero only if it crashes or a fire is refused).

What it measures, each store holding 100 paused and 10,000 completed `dev` instances (with
their history) beside the one the bench fires on:
  1. `fire yield` in process, through the library (`smllm.api.app.App`, its store connection
     kept open between calls, as bench/bench.py times it): median and p99;
  2. the whole `python -m smllm fire --session KEY yield` process: median and p99 (a process
     opens its store afresh: on PostgreSQL a TCP connection and a SCRAM handshake);
  3. 8 concurrent writers (processes, each its own session and instance, each firing through
     the library in a loop for a fixed time): fires per second, all together;
  4. a holding session's blocked stop, the whole hook process of a regular install
     (`VENV/bin/smllm harness hook claude stop`, report.regular_install, with this
     interpreter's psycopg linked in): each PostgreSQL stop run just after a SQLite stop,
     the verdict on the median of those pairs' ratios (target <= 1.5x, issue 20 §7), the
     pairs' spread beside it; PostgreSQL through the store's broker (store/brokered.py),
     and without it (SMLLM_STORE_BROKER=0: psycopg and a connection per stop) for scale.
     `--stops-only` runs this part alone, on stores holding only the bench's instances.

The PostgreSQL server is a throw-away cluster on 127.0.0.1 (tests/helpers/pgserver.py), with
fsync and full_page_writes turned back on here, so that its commits wait for the disk as
SQLite's (synchronous=FULL) do. The SQLite store is filled by bench/fill.py; the PostgreSQL one
gets the very same rows (read back from a scratch SQLite store) in its namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for _path in (str(ROOT / "tests"), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fill import populate, store_counts  # noqa: E402
from report import fs_type, heading, regular_install  # noqa: E402

PG_ENV = "SMLLM_STORE_BENCH_PG"
NAMESPACE = "store-bench"
PAUSED, COMPLETED = 100, 10_000


class Stats(NamedTuple):
    n: int
    median: float
    p99: float

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        s = sorted(values)
        return cls(len(s), statistics.median(s), s[max(0, math.ceil(0.99 * len(s)) - 1)])

    def text(self) -> str:
        return f"median {self.median:8.2f} ms   p99 {self.p99:8.2f} ms   (n={self.n})"


class Setup(NamedTuple):
    name: str
    project: str
    app: Any
    key: str  # a session holding an active instance (GH-0)


def make_project(root: str, name: str) -> str:
    from smllm.cli.demo import copy_example

    folder = os.path.join(root, name)
    os.makedirs(folder)
    copy_example(folder)
    return folder


def fill_postgres(root: str, url: str) -> str:
    """The rows bench/fill.py writes, made in a scratch SQLite store and copied into the
    PostgreSQL store's namespace (its schema made by smllm first)."""
    from smllm.store.postgres import PostgresStore

    scratch = make_project(root, "scratch")
    path = populate(scratch, PAUSED, COMPLETED, start=1)
    conn = sqlite3.connect(path)
    try:
        instances = conn.execute(
            "SELECT id, machine, ref, status, updated, version, data FROM instances"
        ).fetchall()
        history = conn.execute("SELECT instance, data FROM history ORDER BY seq").fetchall()
    finally:
        conn.close()
    store = PostgresStore(url, NAMESPACE)
    store.commit_instances([])  # creates the schema, as a first call would
    store.close()
    import psycopg

    with psycopg.connect(url) as pg, pg.cursor() as cur:
        with cur.copy(
            "COPY smllm.instances (namespace, id, machine, ref, status, holder, updated, "
            "version, data) FROM STDIN"
        ) as copy:
            for id_, machine, ref, status, updated, version, data in instances:
                holder = json.loads(data).get("holder")
                copy.write_row(
                    (NAMESPACE, id_, machine, ref, status, holder, updated, version, data)
                )
        with cur.copy("COPY smllm.history (namespace, instance, data) FROM STDIN") as copy:
            for instance, data in history:
                copy.write_row((NAMESPACE, instance, data))
        cur.execute("ANALYZE smllm.instances")
        cur.execute("ANALYZE smllm.history")
        counts = cur.execute(
            "SELECT status, count(*) FROM smllm.instances WHERE namespace = %s GROUP BY status "
            "ORDER BY status",
            (NAMESPACE,),
        ).fetchall()
        hist = cur.execute(
            "SELECT count(*) FROM smllm.history WHERE namespace = %s", (NAMESPACE,)
        ).fetchone()
    return ", ".join(f"{n} {s}" for s, n in counts) + f"; {hist[0] if hist else 0} history records"


def make_setup(name: str, project: str) -> Setup:
    from smllm.api.app import App

    app = App(cwd=project)
    result = app.fire(None, "enter", (("stateMachine", "dev"), ("issueId", "GH-0")))
    assert result.ok and result.session is not None, result.text()
    return Setup(name, project, app, result.session.key)


def fire_loop(s: Setup, n: int, out: list[float]) -> None:
    for _ in range(n):
        t0 = time.perf_counter_ns()
        result = s.app.fire(s.key, "yield", ())
        out.append((time.perf_counter_ns() - t0) / 1e6)
        if not result.ok:
            raise RuntimeError(f"yield refused:\n{result.text()}")


def in_process(setups: list[Setup], total: int, block: int = 25) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {s.name: [] for s in setups}
    for s in setups:
        fire_loop(s, 10, [])  # warm-up: the connection, caches
    done = 0
    while done < total:  # interleaved blocks: drift hits both alike
        step = min(block, total - done)
        for s in setups:
            fire_loop(s, step, times[s.name])
        done += step
    return times


def processes(setups: list[Setup], runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {s.name: [] for s in setups}
    for i in range(runs + 2):
        for s in setups:
            t0 = time.perf_counter_ns()
            proc = subprocess.run(
                [sys.executable, "-m", "smllm", "fire", "--session", s.key, "yield"],
                cwd=s.project,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            ms = (time.perf_counter_ns() - t0) / 1e6
            if proc.returncode != 0:
                raise RuntimeError(
                    f"smllm fire yield exited {proc.returncode}: {proc.stdout}{proc.stderr}"
                )
            if i >= 2:  # two warm-up runs each
                times[s.name].append(ms)
    return times


# -- concurrent writers ----------------------------------------------------------------------------


def writer(spec: dict[str, Any]) -> None:
    """`store_bench.py _writer SPEC`: enter its own issue, wait for `go`, then fire yield through
    the library until `seconds` have passed; print the count."""
    from smllm.api.app import App

    os.chdir(spec["project"])
    app = App()
    result = app.fire(None, "enter", (("stateMachine", "dev"), ("issueId", spec["ref"])))
    assert result.ok and result.session is not None, result.text()
    key = result.session.key
    app.fire(key, "yield", ())  # the connection and caches, warm
    Path(spec["ready"]).touch()
    while not os.path.exists(spec["go"]):
        time.sleep(0.001)
    end = time.monotonic() + float(spec["seconds"])
    n = refused = 0
    while time.monotonic() < end:
        if app.fire(key, "yield", ()).ok:
            n += 1
        else:
            refused += 1
    print(json.dumps({"fires": n, "refused": refused}))


def writers(
    s: Setup, count: int, seconds: float, env: dict[str, str], root: str
) -> tuple[float, int]:
    folder = tempfile.mkdtemp(prefix=f"writers-{s.name}-", dir=root)
    go = os.path.join(folder, "go")
    procs = []
    for i in range(count):
        spec = {
            "project": s.project,
            "ref": f"GH-{900_000 + i}",
            "ready": os.path.join(folder, f"ready-{i}"),
            "go": go,
            "seconds": seconds,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "_writer", json.dumps(spec)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    end = time.monotonic() + 120
    while not all(os.path.exists(os.path.join(folder, f"ready-{i}")) for i in range(count)):
        for p in procs:
            if p.poll() not in (None, 0):
                raise RuntimeError(f"a writer died: {p.communicate()[1][-2000:]}")
        if time.monotonic() > end:
            raise RuntimeError("the writers never got ready")
        time.sleep(0.01)
    Path(go).touch()
    total = refused = 0
    for p in procs:
        out, err = p.communicate(timeout=seconds + 120)
        if p.returncode != 0:
            raise RuntimeError(f"a writer failed: {err[-2000:]}")
        d = json.loads(out.strip().splitlines()[-1])
        total += d["fires"]
        refused += d["refused"]
    return total / seconds, refused


# -- a holding session's blocked stop: the hook process ----------------------------------------

#: the most a brokered PostgreSQL stop may cost, as a multiple of the SQLite one (paired medians)
STOP_TARGET = 1.5


def hook_install(cache: str) -> tuple[str | None, str]:
    """The regular install (its own venv, in `cache`/postgres), with this interpreter's
    psycopg linked into its site-packages (the install has no dependencies: see
    report.regular_install); (its `smllm` script, or None; how it was made)."""
    import importlib.util

    python, how = regular_install(
        str(ROOT), os.path.join(cache, "postgres"), "smllm", "smllm.cli.main:main"
    )
    if python is None:
        return None, how
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for module in ("psycopg", "psycopg_binary", "psycopg_c", "typing_extensions"):
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        path = os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin
        for source in (path, path + ".libs"):  # a binary wheel's bundled libpq sits beside it
            dest = os.path.join(purelib, os.path.basename(source))
            if os.path.exists(source) and not os.path.lexists(dest):
                os.symlink(source, dest)
    probe = subprocess.run([python, "-c", "import psycopg"], capture_output=True, text=True)
    if probe.returncode != 0:
        return None, f"psycopg can't be linked into {python}: {probe.stderr.strip()[-200:]}"
    return os.path.join(os.path.dirname(python), "smllm"), f"{how}; psycopg linked in"


def _hook(argv: list[str], hook: str, body: dict[str, Any], cwd: str, env: dict[str, str]) -> Any:
    return subprocess.run(
        [*argv, "harness", "hook", "claude", hook],
        input=json.dumps({"cwd": cwd, **body}),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def hold_by_hook(project: str, env: dict[str, str], host: str, ref: str) -> None:
    """A session bound to Claude session `host`, holding issue `ref` (by this tree's smllm,
    which also builds the compiled machine cache)."""
    here = [sys.executable, "-m", "smllm"]
    ran = _hook(here, "session-start", {"session_id": host}, project, env)
    text = json.loads(ran.stdout)["hookSpecificOutput"]["additionalContext"]
    key = text.split("\n")[1].split(" ")[1]
    fire = [*here, "fire", "--session", key, "enter", "--param", "stateMachine=dev"]
    done = subprocess.run(
        [*fire, "--param", f"issueId={ref}"], cwd=project, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"enter {ref} failed: {done.stdout}{done.stderr}")


def blocked_stop(script: str, project: str, env: dict[str, str], host: str) -> float:
    """One blocked stop's process, in ms (the prompt that clears the last block, untimed)."""
    _hook([script], "user-prompt-submit", {"session_id": host, "prompt": "go on"}, project, env)
    t0 = time.perf_counter_ns()
    ran = _hook([script], "stop", {"session_id": host, "stop_hook_active": False}, project, env)
    ms = (time.perf_counter_ns() - t0) / 1e6
    if ran.returncode != 0 or not ran.stdout.startswith('{"decision":"block"'):
        raise RuntimeError(f"the stop didn't block: {ran.stdout[:80]!r} {ran.stderr[:300]!r}")
    return ms


def wait_for_broker(folder: str) -> None:
    end = time.monotonic() + 20
    while not (os.path.isdir(folder) and any(n.endswith(".sock") for n in os.listdir(folder))):
        if time.monotonic() > end:
            raise RuntimeError(f"no broker started in {folder}")
        time.sleep(0.02)


def end_brokers(folder: str) -> None:
    """SIGTERM the brokers whose logs are in `folder` (the server's end would end them too)."""
    import signal

    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        if name.endswith(".log"):
            words = Path(folder, name).read_text().split()
            if len(words) > 2 and words[1] == "broker":
                with contextlib.suppress(OSError):
                    os.kill(int(words[2]), signal.SIGTERM)


def stop_pairs(
    script: str, lite: str, pg: str, env: dict[str, str], runs: int, runtime: str
) -> None:
    for project, host in ((lite, "stop-sqlite"), (pg, "stop-postgres")):
        hold_by_hook(project, env, host, "GH-424242")
    direct = {**env, "SMLLM_STORE_BROKER": "0"}
    folder = os.path.join(runtime, "smllm")
    blocked_stop(script, lite, env, "stop-sqlite")
    first = blocked_stop(script, pg, env, "stop-postgres")  # no broker yet: one starts
    wait_for_broker(folder)
    times: dict[str, list[float]] = {"sqlite": [], "postgres": [], "postgres, direct": []}
    ratios: dict[str, list[float]] = {"postgres": [], "postgres, direct": []}
    for i in range(runs + 3):  # the first three rounds warm up
        for name, pg_env in (("postgres", env), ("postgres, direct", direct)):
            base = blocked_stop(script, lite, env, "stop-sqlite")
            ms = blocked_stop(script, pg, pg_env, "stop-postgres")  # just after its pair's SQLite
            if i >= 3:
                times["sqlite"].append(base)
                times[name].append(ms)
                ratios[name].append(ms / base)
    end_brokers(folder)
    for name, values in times.items():
        print(f"  {name:<18} {Stats.of(values).text()}")
    print(f"  the first postgres stop (no broker yet: read directly, one started) {first:.1f} ms")
    for name, values in ratios.items():
        ratio = statistics.median(values)
        deciles = statistics.quantiles(values, n=10)
        thirds = [statistics.median(values[k::3]) for k in range(3)]
        line = (
            f"  {name} / sqlite, paired: median {ratio:.2f}x (p10 {deciles[0]:.2f}x, p90 "
            f"{deciles[-1]:.2f}x; every third pair: {', '.join(f'{t:.2f}x' for t in thirds)})"
        )
        if name == "postgres":
            line += f"  target <= {STOP_TARGET:g}x  {'PASS' if ratio <= STOP_TARGET else 'MISS'}"
        print(line)


# -- main ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def isolated(parent: str | None, keep: bool) -> Iterator[tuple[str, dict[str, str]]]:
    from smllm.cli.demo import throwaway

    with throwaway("smllm-store-bench-", parent, keep) as (root, env):
        env["HOME"] = root
        yield root, env
        if keep:
            print(f"\n(kept {root})")


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["_writer"]:
        writer(json.loads(args_in[1]))
        return 0
    from bench import default_venv_cache

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (CI)")
    ap.add_argument("--fires", type=int, default=None, help="in-process fires each (default 1000)")
    ap.add_argument("--runs", type=int, default=None, help="process runs each (default 60)")
    ap.add_argument("--writers", type=int, default=8, help="concurrent writers (default 8)")
    ap.add_argument("--seconds", type=float, default=None, help="writers' time (default 10 s)")
    ap.add_argument("--stops", type=int, default=None, help="blocked-stop pairs (default 60)")
    ap.add_argument("--stops-only", action="store_true", help="the blocked stops alone (part 4)")
    ap.add_argument("--venv-cache", default=default_venv_cache(), help="regular install cache")
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args(args_in)
    fires = args.fires or (150 if args.quick else 1000)
    runs = args.runs or (8 if args.quick else 60)
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    stops = args.stops or (15 if args.quick else 60)
    from helpers.pgserver import PgServer

    print(
        "smllm store report: PostgreSQL over loopback against SQLite"
        + (" (--quick)" if args.quick else "")
    )
    script, how = hook_install(args.venv_cache)
    # the brokers' sockets: a short path of its own (a socket's path holds 103 bytes)
    runtime = tempfile.mkdtemp(prefix="smllm-rt-")
    with isolated(args.dir, args.keep) as (root, env):
        env["XDG_RUNTIME_DIR"] = runtime
        server = PgServer.start(Path(root) / "pg")
        try:
            # commits wait for the disk, as SQLite's do (the test cluster turns fsync off)
            server.psql("ALTER SYSTEM SET fsync = on")
            server.psql("ALTER SYSTEM SET full_page_writes = on")
            server.psql("SELECT pg_reload_conf()")
            time.sleep(0.5)
            fsync = server.psql("SHOW fsync").strip()
            url = server.url()
            env[PG_ENV] = os.environ[PG_ENV] = url
            heading("the stores")
            print(
                f"  temp folder on {fs_type(root)}; PostgreSQL 127.0.0.1:{server.port}, "
                f"fsync = {fsync}"
            )
            lite = make_project(root, "sqlite")
            pg = make_project(root, "postgres")
            config = Path(pg) / ".smllm" / "config.toml"
            config.write_text(
                config.read_text() + f'\n[state]\nurl-env = "{PG_ENV}"\nnamespace = "{NAMESPACE}"\n'
            )
            if not args.stops_only:
                setups = fill_and_fire(root, url, lite, pg, env, fires, runs, args, seconds)
            heading(f"a holding session's blocked stop: the hook process, {stops} pairs")
            if script is None:
                print(f"  no regular install: {how}")
            else:
                print(f"  regular install: {how}")
                stop_pairs(script, lite, pg, env, stops, runtime)
            if not args.stops_only:
                for s in setups:
                    with contextlib.suppress(Exception):
                        s.app.user.close()
                    for store in s.app.opened.values():
                        with contextlib.suppress(Exception):
                            store.close()
        finally:
            server.remove()
            end_brokers(os.path.join(runtime, "smllm"))
            shutil.rmtree(runtime, ignore_errors=True)
    return 0


def fill_and_fire(
    root: str,
    url: str,
    lite: str,
    pg: str,
    env: dict[str, str],
    fires: int,
    runs: int,
    args: argparse.Namespace,
    seconds: float,
) -> list[Setup]:
    """Parts 1 – 3: the stores filled, then fire in process, as a process, and concurrently."""
    t0 = time.monotonic()
    path = populate(lite, PAUSED, COMPLETED, start=1)
    print(f"  sqlite     {store_counts(path)}  (filled in {time.monotonic() - t0:.1f} s)")
    t0 = time.monotonic()
    print(f"  postgres   {fill_postgres(root, url)}  (filled in {time.monotonic() - t0:.1f} s)")
    setups = [make_setup("sqlite", lite), make_setup("postgres", pg)]

    heading(f"fire yield in process (smllm.api.app.App), {fires} each, interleaved")
    times = in_process(setups, fires)
    stats = {k: Stats.of(v) for k, v in times.items()}
    for name, st in stats.items():
        print(f"  {name:<10} {st.text()}")
    print(
        f"  postgres / sqlite: median "
        f"{stats['postgres'].median / stats['sqlite'].median:.2f}x, "
        f"p99 {stats['postgres'].p99 / stats['sqlite'].p99:.2f}x"
    )

    heading(f"the whole `python -m smllm fire --session KEY yield` process, {runs} each")
    ptimes = processes(setups, runs, env)
    pstats = {k: Stats.of(v) for k, v in ptimes.items()}
    for name, st in pstats.items():
        print(f"  {name:<10} {st.text()}")
    print(
        f"  postgres - sqlite: median {pstats['postgres'].median - pstats['sqlite'].median:+.1f} ms"
    )

    heading(f"{args.writers} concurrent writers, each its own session and issue, {seconds:g} s")
    for s in setups:
        rate, refused = writers(s, args.writers, seconds, env, root)
        print(f"  {s.name:<10} {rate:8.0f} fires/s   ({refused} refused)")
    return setups


if __name__ == "__main__":
    sys.exit(main())
