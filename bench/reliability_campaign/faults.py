"""faults: kill -9 of firing processes (both backends), and the PostgreSQL server stopped with
-m immediate and started again under load."""

from __future__ import annotations

import json
import random
import statistics
import time
from collections import Counter

from .common import (
    STORE_ERRORS,
    Call,
    Size,
    Verdict,
    World,
    classify,
    enter_argv,
    first_error,
    heading,
    line,
    ms_stats,
    run_cli,
)
from .store_checks import (
    Snapshot,
    check_calls,
    check_histories,
    check_replies,
    read_sessions,
    read_store,
)
from .workers import finish, read_log, spawn, wait_ready


def truth(snap: Snapshot, key: str) -> str | None:
    """The ref the instance records say `key` holds (active), if any."""
    for inst in snap.instances.values():
        if inst.get("holder") == key and inst.get("status") == "active":
            return str(inst["ref"])
    return None


def kill_run(world: World, backend: str, fires: int, v: Verdict, seed: int) -> None:
    """kill -9 of a firing process at a random point, again and again, until `fires` calls were
    made (returned or cut short); the store checked after every kill."""
    p = world.project(backend)
    where = f"faults/{backend}"
    rng = random.Random(seed)
    refs = ["GH-1", "GH-2"]
    calls: list[Call] = []
    kills = landed = killed_in_flight = 0
    began = time.monotonic()
    last_records = 0
    keys: list[str] = []
    for _ in range(2):
        code, out, err = run_cli(["session", "new", "--json"], p.folder, p.env)
        keys.append(json.loads(out)["session"])
    snap = read_store(p)
    life = 0
    while len(calls) < fires:
        log = p.folder.parent / f"kill-{life}.jsonl"
        key = keys[life % 2]
        spec = {
            "project": str(p.folder),
            "refs": refs,
            "seed": seed * 1000 + life,
            "log": str(log),
            "seconds": 60,
            "session": key,
            "holding": truth(snap, key),
        }
        proc = spawn(spec, p.env)
        wait_ready([log], [proc])
        # most lives are cut after a few fires, at a random point of one
        took = [c["t1"] - c["t0"] for c in calls if "t1" in c]
        window = 4 * statistics.median(took) if took else min(2.0, 0.05 * 2**life)
        time.sleep(rng.uniform(0.0, window))
        if proc.poll() is not None:
            v.fail(
                f"{where}: the worker stopped by itself: "
                f"{proc.stderr.read().decode()[-1000:] if proc.stderr else ''}"
            )
        proc.kill()
        proc.communicate(timeout=30)
        kills += 1
        life += 1
        mine, _ = read_log(log)
        calls += mine
        cut = sum(1 for c in mine if c["k"] == "killed")
        snap = read_store(p)
        v.extend(snap.torn, f"{where}: torn after kill {kills}")
        v.extend(check_histories(snap.instances, snap.history), f"{where} after kill {kills}")
        accepted_now = sum(1 for c in mine if c["k"] == "ok")
        extra = snap.records - last_records - accepted_now
        if not v.check(
            0 <= extra <= cut,
            f"{where}: kill {kills}: {extra} records beside the {accepted_now} accepted "
            f"calls ({cut} cut short)",
        ):
            break
        landed += extra
        killed_in_flight += cut
        last_records = snap.records
        _, torn = read_sessions(p)
        v.extend(torn, f"{where}: torn user store after kill {kills}")
        if len(v.violations) > 20:
            break
    snap = read_store(p)
    v.extend(
        check_calls(calls, snap, extra_ok=lambda c: c["k"] == "killed"), f"{where}: lost update"
    )
    kinds, bad = check_replies(
        calls, {"ok", "killed", "lost", "moved", "status", "ref-taken", "busy", "not-offered"}
    )
    v.extend(bad, f"{where}: reply")
    # the store opens and the next fire works: a real `smllm fire` process per session
    nexts: Counter[str] = Counter()
    for key in keys:
        held = truth(snap, key)
        argv = ["fire", "--session", key, "yield"] if held else enter_argv(key, "GH-3")
        code, out, err = run_cli(argv, p.folder, p.env)
        kind = classify(code, out, err)
        nexts[kind] += 1
        v.check(
            kind in ("ok", "lost", "moved", "status"),
            f"{where}: the next fire of {key} after the kills: exit {code} {first_error(out, err)}",
        )
    final = read_store(p)
    v.extend(check_histories(final.instances, final.history), f"{where} at the end")
    print(f"  [{backend}] kill -9")
    line(
        "fires",
        f"{len(calls) - killed_in_flight} returned + {killed_in_flight} cut short = "
        f"{len(calls)}, {kills} kill -9, in {time.monotonic() - began:.1f} s",
    )
    line("returned", ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()) if k != "killed"))
    line(
        "killed calls whose commit landed",
        f"{landed} of {killed_in_flight} (the rest left no trace)",
    )
    line(
        "store after every kill",
        f"{len(snap.instances)} instances, {snap.records} history records, 0 gaps, "
        f"{len(snap.torn)} torn"
        if not v.violations
        else "see violations",
    )
    line("next fire of each session", ", ".join(f"{k} {n}" for k, n in sorted(nexts.items())))


def server_stops(world: World, stops: int, v: Verdict, seed: int) -> None:
    """Workers fire on PostgreSQL while the server is stopped with -m immediate (a crash, as
    far as clients can tell) and started again, `stops` times."""
    server = world.pg()
    p = world.project("postgres")
    where = "faults/postgres server stop"
    rng = random.Random(seed)
    workers = 3
    stop_file = p.folder.parent / "stop"
    logs = [p.folder.parent / f"stop-{i}.jsonl" for i in range(workers)]
    specs = [
        {
            "project": str(p.folder),
            "refs": ["GH-1", "GH-2"],
            "seed": seed + i,
            "log": str(log),
            "seconds": 600,
            "stop": str(stop_file),
            "gap_s": 0.01,
        }
        for i, log in enumerate(logs)
    ]
    procs = [spawn(s, p.env) for s in specs]
    began = time.monotonic()
    outages: list[float] = []
    try:
        wait_ready(logs, procs)
        for _ in range(stops):
            time.sleep(rng.uniform(0.5, 2.0))
            t0 = time.monotonic()
            server.stop(mode="immediate")
            time.sleep(rng.uniform(0.2, 1.5))
            server.restart()
            outages.append(time.monotonic() - t0)
        time.sleep(2.0)
    finally:
        stop_file.touch()
        if not server.running():
            server.restart()
    finish(procs, v, limit=120)
    calls = [c for log in logs for c in read_log(log)[0]]
    snap = read_store(p)
    v.extend(snap.torn, f"{where}: torn")
    v.extend(check_histories(snap.instances, snap.history), where)
    maybe = {"unknown-commit"}
    v.extend(check_calls(calls, snap, extra_ok=lambda c: c["k"] in maybe), f"{where}: lost update")
    kinds, bad = check_replies(
        calls, {"ok", "lost", "moved", "status", "ref-taken", "busy", "not-offered", *STORE_ERRORS}
    )
    v.extend(bad, f"{where}: reply")
    # the store opens and the next fire works
    code, out, err = run_cli(
        ["fire", "--session", read_log(logs[0])[1][0], "yield"], p.folder, p.env
    )
    v.check(
        classify(code, out, err) in ("ok", "lost", "moved", "status", "not-offered"),
        f"{where}: the next fire: exit {code} {first_error(out, err)}",
    )
    errors = [(c["t1"] - c["t0"]) * 1000 for c in calls if c["c"] == 2]
    print(f"  [postgres] pg_ctl stop -m immediate x {stops}, then start")
    line(
        "calls",
        f"{len(calls)} in {time.monotonic() - began:.1f} s; outages "
        f"{', '.join(f'{o:.1f}' for o in outages)} s",
    )
    line("replies", ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    line("store errors (exit 2) took", ms_stats(errors))
    line(
        "store",
        f"{len(snap.instances)} instances, {snap.records} history records, {len(snap.torn)} torn",
    )


def faults(world: World, size: Size, v: Verdict) -> None:
    heading(
        f"faults: kill -9 in {size.kill_fires_sqlite} fires (SQLite), {size.kill_fires_pg} "
        f"(PostgreSQL); server stops x {size.pg_stops}"
    )
    kill_run(world, "sqlite", size.kill_fires_sqlite, v, 20261)
    kill_run(world, "postgres", size.kill_fires_pg, v, 20262)
    server_stops(world, size.pg_stops, v, 20263)
