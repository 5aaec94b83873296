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
     the library in a loop for a fixed time): fires per second, all together.

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
from report import fs_type, heading  # noqa: E402

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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (CI)")
    ap.add_argument("--fires", type=int, default=None, help="in-process fires each (default 1000)")
    ap.add_argument("--runs", type=int, default=None, help="process runs each (default 60)")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=None, help="writers' time (default 10 s)")
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args(args_in)
    fires = args.fires or (150 if args.quick else 1000)
    runs = args.runs or (8 if args.quick else 60)
    seconds = args.seconds or (3.0 if args.quick else 10.0)
    from helpers.pgserver import PgServer

    print(
        "smllm store report: PostgreSQL over loopback against SQLite"
        + (" (--quick)" if args.quick else "")
    )
    with isolated(args.dir, args.keep) as (root, env):
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
            t0 = time.monotonic()
            path = populate(lite, PAUSED, COMPLETED, start=1)
            print(f"  sqlite     {store_counts(path)}  (filled in {time.monotonic() - t0:.1f} s)")
            pg = make_project(root, "postgres")
            config = Path(pg) / ".smllm" / "config.toml"
            config.write_text(
                config.read_text() + f'\n[state]\nurl-env = "{PG_ENV}"\nnamespace = "{NAMESPACE}"\n'
            )
            t0 = time.monotonic()
            print(
                f"  postgres   {fill_postgres(root, url)}  (filled in "
                f"{time.monotonic() - t0:.1f} s)"
            )
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
                f"  postgres - sqlite: median "
                f"{pstats['postgres'].median - pstats['sqlite'].median:+.1f} ms"
            )

            heading(
                f"{args.writers} concurrent writers, each its own session and issue, {seconds:g} s"
            )
            for s in setups:
                rate, refused = writers(s, args.writers, seconds, env, root)
                print(f"  {s.name:<10} {rate:8.0f} fires/s   ({refused} refused)")
            for s in setups:
                with contextlib.suppress(Exception):
                    s.app.user.close()
                for store in s.app.opened.values():
                    with contextlib.suppress(Exception):
                        store.close()
        finally:
            server.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
