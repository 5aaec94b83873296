"""load: processes firing on shared instances, the history then equal to the accepted calls."""

from __future__ import annotations

import time

from .common import BACKENDS, Size, Verdict, World, heading, line, ms_stats
from .store_checks import check_calls, check_histories, check_replies, read_sessions, read_store
from .workers import finish, read_log, spawn, wait_ready


def load(world: World, size: Size, v: Verdict, backends: tuple[str, ...] = BACKENDS) -> None:
    heading(
        f"load: {size.load_procs} processes x {size.load_fires} fires on {size.load_refs} "
        f"shared issues"
    )
    for backend in backends:
        p = world.project(backend)
        began = time.monotonic()
        go = p.folder.parent / "go"
        logs = [p.folder.parent / f"load-{i}.jsonl" for i in range(size.load_procs)]
        specs = [
            {
                "project": str(p.folder),
                "refs": [f"GH-{n}" for n in range(1, size.load_refs + 1)],
                "rounds": size.load_fires,
                "seed": 11_000 + i,
                "log": str(log),
                "go": str(go),
            }
            for i, log in enumerate(logs)
        ]
        procs = [spawn(s, p.env) for s in specs]
        wait_ready(logs, procs)
        t0 = time.monotonic()
        go.touch()
        finish(procs, v)
        wall = time.monotonic() - t0
        calls = [c for log in logs for c in read_log(log)[0]]
        snap = read_store(p)
        where = f"load/{backend}"
        v.check(
            len(calls) == size.load_procs * size.load_fires,
            f"{where}: {len(calls)} calls returned, not {size.load_procs * size.load_fires}",
        )
        v.extend(snap.torn, f"{where}: torn")
        v.extend(check_histories(snap.instances, snap.history), where)
        v.extend(check_calls(calls, snap), f"{where}: lost update")
        kinds, bad = check_replies(calls, {"ok", "lost", "moved", "status", "ref-taken", "busy"})
        v.extend(bad, f"{where}: reply")
        sessions, torn = read_sessions(p)
        v.extend(torn, f"{where}: torn user store")
        accepted = kinds["ok"]
        losers = sum(n for k, n in kinds.items() if k != "ok")
        print(f"  [{backend}]")
        line(
            "calls",
            f"{len(calls)} in {wall:.1f} s ({len(calls) / wall:.0f} fires/s), {accepted} "
            f"accepted, {losers} refused",
        )
        line(
            "refusals",
            ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()) if k != "ok") or "none",
        )
        line(
            "store",
            f"{len(snap.instances)} instances, {snap.records} history records, {snap.rows} "
            f"rows read, {len(snap.torn)} torn; {sessions} sessions",
        )
        line(
            "history = accepted calls",
            "yes"
            if snap.records == accepted and not v.violations
            else f"{snap.records} records for {accepted} accepted",
        )
        line("latency of a call", ms_stats([(c["t1"] - c["t0"]) * 1000 for c in calls]))
        line("wall time (with set-up)", f"{time.monotonic() - began:.1f} s")
