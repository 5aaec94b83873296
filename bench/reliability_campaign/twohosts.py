"""twohosts: two network namespaces joined by a veth pair, the PostgreSQL server in one;
load across the pair, B's link cut mid-run, and a commit stranded between UPDATE and COMMIT."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .common import (
    MACHINE,
    PG_ENV,
    STORE_ERRORS,
    Call,
    Project,
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
from .store_checks import Snapshot, check_calls, check_histories, check_replies, read_store
from .workers import finish, read_log, spawn, wait_ready

NET = "10.231.0"


class Net:
    """Two network namespaces joined by a veth pair, addresses only inside them; removed by
    `remove()` (also at exit and on SIGTERM), whatever happened."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}"
        self.ns = (f"smllm-a-{tag}", f"smllm-b-{tag}")
        self.veth = (f"sma{tag}", f"smb{tag}")
        self.addr = (f"{NET}.1", f"{NET}.2")
        self.made: list[str] = []

    @staticmethod
    def ip(*args: str) -> None:
        proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")

    def exec(self, side: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns[side]]

    def make(self) -> None:
        atexit.register(self.remove)
        for ns in self.ns:
            self.ip("netns", "add", ns)
            self.made.append(ns)
        self.ip("link", "add", self.veth[0], "type", "veth", "peer", "name", self.veth[1])
        for side in (0, 1):
            self.ip("link", "set", self.veth[side], "netns", self.ns[side])
            self.ip(
                "-n", self.ns[side], "addr", "add", f"{self.addr[side]}/24", "dev", self.veth[side]
            )
            self.ip("-n", self.ns[side], "link", "set", "lo", "up")
            self.ip("-n", self.ns[side], "link", "set", self.veth[side], "up")

    def link(self, side: int, up: bool) -> None:
        self.ip("-n", self.ns[side], "link", "set", self.veth[side], "up" if up else "down")

    def remove(self) -> None:
        for ns in self.made:
            # the veth pair goes with its namespaces
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.made = []


def took_over_across(snap: Snapshot, side_of: dict[str, int]) -> Counter[str]:
    """Takeovers by the records' notes: A→B (a session on B took over from one on A), B→A."""
    out: Counter[str] = Counter()
    for recs in snap.history.values():
        for r in recs:
            for note in r.get("trace") or ():
                m = re.match(r"Took over from session (sm-\w+)", str(note))
                if m and m.group(1) in side_of and str(r.get("session")) in side_of:
                    a, b = side_of[m.group(1)], side_of[str(r["session"])]
                    out["AB"[a] + "→" + "AB"[b]] += 1
    return out


def twohosts(world: World, size: Size, v: Verdict) -> None:
    from helpers.pgserver import PgServer

    heading(
        f"two hosts: network namespaces, the server on host A, {size.hosts_procs} processes "
        f"per host"
    )
    if os.geteuid() != 0 or shutil.which("ip") is None:
        # a machine's limits, not a broken invariant: said, not failed (the other runs go on)
        line("not run", "needs root and `ip` (iproute2) to make network namespaces")
        return
    net = Net()
    server: Any = None
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        net.make()
        line(
            "namespaces",
            f"{net.ns[0]} ({net.addr[0]}, the server) and {net.ns[1]} ({net.addr[1]}), veth "
            f"{net.veth[0]}/{net.veth[1]}",
        )
        t0 = time.monotonic()
        server = PgServer.start(world.root / "pg-netns", listen=net.addr[0], prefix=net.exec(0))
        line(
            "PostgreSQL server in A",
            f"{server.url(password='***')} (started in {time.monotonic() - t0:.1f} s)",
        )
        url = server.url()
        hosts = [world.project("postgres", url, name=f"host-{s}") for s in "ab"]
        ns = hosts[0].namespace
        hosts[1] = twin_namespace(hosts[1], ns)
        reader = hosts[0]._replace(url=server.socket_url())
        refs = ["GH-1", "GH-2", "GH-3"]
        # phase 1: both hosts take over each other's instances under load
        go = world.root / "hosts-go"
        logs: list[Path] = []
        procs = []
        for side, h in enumerate(hosts):
            for i in range(size.hosts_procs):
                log = h.folder.parent / f"load-{i}.jsonl"
                logs.append(log)
                spec = {
                    "project": str(h.folder),
                    "refs": refs,
                    "seed": 31_000 + 10 * side + i,
                    "log": str(log),
                    "go": str(go),
                    "seconds": size.hosts_seconds,
                }
                procs.append(spawn(spec, h.env, net.exec(side)))
        wait_ready(logs, procs)
        go.touch()
        finish(procs, v)
        calls = [c for log in logs for c in read_log(log)[0]]
        side_of = {
            k: (0 if str(log).find("host-a") >= 0 else 1) for log in logs for k in read_log(log)[1]
        }
        snap = read_store(reader)
        where = "two hosts/load"
        v.extend(snap.torn, f"{where}: torn")
        v.extend(check_histories(snap.instances, snap.history), where)
        v.extend(check_calls(calls, snap), f"{where}: lost update")
        kinds, bad = check_replies(calls, {"ok", "lost", "moved", "status", "ref-taken", "busy"})
        v.extend(bad, f"{where}: reply")
        per_side = Counter(
            "AB"[side_of[c["s"]]] + ("" if c["k"] == "ok" else " refused") for c in calls
        )
        print("  [postgres] load across the veth pair")
        line(
            "calls",
            f"{len(calls)} in {size.hosts_seconds:.0f} s: "
            + ", ".join(f"{k} {n}" for k, n in sorted(per_side.items())),
        )
        line("replies", ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        line(
            "takeovers across hosts",
            ", ".join(f"{k} {n}" for k, n in sorted(took_over_across(snap, side_of).items()))
            or "none",
        )
        line(
            "latency",
            "A " + ms_stats([(c["t1"] - c["t0"]) * 1000 for c in calls if side_of[c["s"]] == 0]),
        )
        line(
            "", "B " + ms_stats([(c["t1"] - c["t0"]) * 1000 for c in calls if side_of[c["s"]] == 1])
        )
        line(
            "store",
            f"{len(snap.instances)} instances, {snap.records} history records = "
            f"{kinds['ok']} accepted, {len(snap.torn)} torn",
        )
        link_cut(world, net, hosts, reader, refs, size, v, calls)
        stranded(net, hosts, reader, v)
    except Exception as exc:  # reported as a violation, cleaned up below
        v.fail(f"two hosts: {type(exc).__name__}: {exc}")
    finally:
        if server is not None:
            server.remove()
        net.remove()
        signal.signal(signal.SIGTERM, previous)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    v.check(not any(n in left for n in net.ns), f"two hosts: namespaces left behind: {left}")
    line(
        "clean-up",
        "namespaces and veth pair removed" if not any(n in left for n in net.ns) else "FAILED",
    )


def twin_namespace(p: Project, namespace: str) -> Project:
    config = p.folder / ".smllm" / "config.toml"
    config.write_text(config.read_text().replace(p.namespace, namespace))
    return p._replace(namespace=namespace)


def link_cut(
    world: World,
    net: Net,
    hosts: list[Project],
    reader: Project,
    refs: list[str],
    size: Size,
    v: Verdict,
    before: list[Call],
) -> None:
    """Workers on both hosts; B's end of the veth pair set down mid-run for a while, then up."""
    where = "two hosts/link cut"
    stop = world.root / "hosts-stop"
    logs: list[Path] = []
    procs = []
    for side, h in enumerate(hosts):
        for i in range(size.hosts_procs):
            log = h.folder.parent / f"cut-{i}.jsonl"
            logs.append(log)
            spec = {
                "project": str(h.folder),
                "refs": refs,
                "seed": 32_000 + 10 * side + i,
                "log": str(log),
                "seconds": 600,
                "stop": str(stop),
                "gap_s": 0.02,
            }
            procs.append(spawn(spec, h.env, net.exec(side)))
    try:
        wait_ready(logs, procs)
        time.sleep(2.0)
        cut_at = time.time()
        net.link(1, up=False)
        time.sleep(size.hosts_cut_seconds)
        back_at = time.time()
        net.link(1, up=True)
        time.sleep(max(4.0, size.hosts_seconds / 4))
    finally:
        stop.touch()
        with contextlib.suppress(Exception):
            net.link(1, up=True)
    finish(procs, v, limit=120)
    side_of = {k: (0 if "host-a" in str(log) else 1) for log in logs for k in read_log(log)[1]}
    calls = [c for log in logs for c in read_log(log)[0]]
    snap = read_store(reader)
    v.extend(snap.torn, f"{where}: torn")
    v.extend(check_histories(snap.instances, snap.history), where)
    v.extend(
        check_calls(before + calls, snap, extra_ok=lambda c: c["k"] == "unknown-commit"),
        f"{where}: lost update",
    )
    kinds, bad = check_replies(
        calls, {"ok", "lost", "moved", "status", "ref-taken", "busy", "not-offered", *STORE_ERRORS}
    )
    v.extend(bad, f"{where}: reply")
    b_errors = [c for c in calls if side_of[c["s"]] == 1 and c["c"] == 2]
    v.check(bool(b_errors), f"{where}: host B saw no store error while its link was down")
    for c in b_errors:
        took = c["t1"] - c["t0"]
        v.check(took <= 16.0, f"{where}: a store error took {took:.1f} s: {c.get('m')}")
        v.check(c["k"] in STORE_ERRORS, f"{where}: unclear error: {c.get('m')}")
    a_errors = [c for c in calls if side_of[c["s"]] == 0 and c["c"] == 2]
    b_after = [c for c in calls if side_of[c["s"]] == 1 and c["k"] == "ok" and c["t0"] > back_at]
    v.check(bool(b_after), f"{where}: host B made no accepted call once the link was back up")
    busy = [c for c in calls if c["k"] == "busy"]
    # no damage: a fresh process on B fires and is answered
    code, out, err = run_cli(
        ["fire", "enter", "--param", f"stateMachine={MACHINE}", "--param", "issueId=GH-9"],
        hosts[1].folder,
        hosts[1].env,
        prefix=net.exec(1),
    )
    v.check(code == 0, f"{where}: a fire from B after the cut: exit {code} {first_error(out, err)}")
    messages = Counter(
        re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "HOST", c.get("m", ""))[:110] for c in b_errors
    )
    print(f"  [postgres] B's veth down for {back_at - cut_at:.1f} s mid-run")
    line("calls", f"{len(calls)}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    line(
        "B's store errors (exit 2)",
        f"{len(b_errors)}, each within "
        f"{max((c['t1'] - c['t0'] for c in b_errors), default=0):.1f} s; "
        + ms_stats([(c["t1"] - c["t0"]) * 1000 for c in b_errors]),
    )
    for m, n in messages.most_common(4):
        line("", f"{n} x {m}")
    line("A's store errors, busy refusals", f"{len(a_errors)}, {len(busy)}")
    line("B's accepted calls after the link is up", str(len(b_after)))
    line(
        "store",
        f"{len(snap.instances)} instances, {snap.records} history records, {len(snap.torn)} torn",
    )


STRANDED = """
import os, sys, time
from smllm.store.postgres import PostgresStore
store = PostgresStore(os.environ[sys.argv[1]], sys.argv[2])
conn = store._open()  # smllm's own connection, with its session settings
conn.execute("BEGIN")
conn.execute(
    "UPDATE smllm.instances SET updated = updated WHERE namespace = %s AND ref = %s",
    (sys.argv[2], sys.argv[3]),
)
print("locked", flush=True)
time.sleep(600)
"""


def stranded(net: Net, hosts: list[Project], reader: Project, v: Verdict) -> None:
    """A commit cut off between its UPDATE and its COMMIT: B's process holds the row lock of
    an instance (smllm's connection, mid-transaction) when its link goes down, and dies. Once
    the link is back, host A must be able to write that instance again, soon (the server must
    not keep the dead client's transaction, and its lock, open for hours)."""
    import psycopg

    where = "two hosts/stranded commit"
    b = hosts[1]
    ref = "GH-1"
    proc = subprocess.Popen(
        [*net.exec(1), sys.executable, "-c", STRANDED, PG_ENV, b.namespace, ref],
        env=b.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "locked":
            v.fail(f"{where}: the probe didn't start: {proc.communicate(timeout=30)[1][-1000:]}")
            return
        net.link(1, up=False)
        time.sleep(1.0)
        proc.kill()
        proc.communicate(timeout=30)
        # host B goes away for good (power lost): its kernel forgets the connection, and the
        # FIN or RST it would send never reaches the server
        subprocess.run(
            [*net.exec(1), "ss", "-K", "dst", net.addr[0]], capture_output=True, timeout=30
        )
        time.sleep(1.0)
    finally:
        net.link(1, up=True)
        if proc.poll() is None:
            proc.kill()
    back = time.monotonic()
    a = hosts[0]
    code, out, err = run_cli(["session", "new", "--json"], a.folder, a.env, prefix=net.exec(0))
    key = json.loads(out)["session"]
    tries: Counter[str] = Counter()
    took = None
    while time.monotonic() - back < 40:
        code, out, err = run_cli(enter_argv(key, ref), a.folder, a.env, prefix=net.exec(0))
        kind = classify(code, out, err)
        tries[kind] += 1
        if code == 0:
            took = time.monotonic() - back
            break
        if kind not in ("busy", "lost", "moved", "status"):
            v.fail(f"{where}: A's enter: exit {code} {first_error(out, err)}")
            break
        time.sleep(0.5)
    with psycopg.connect(reader.url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'smllm' "
            "AND state = 'idle in transaction'"
        ).fetchone()
    v.check(
        took is not None and took <= 20,
        f"{where}: host A couldn't write {ref} for {time.monotonic() - back:.0f} s after the link "
        f"came back ({dict(tries)}): the dead client's transaction still holds its row lock",
    )
    print("  [postgres] a commit cut between its UPDATE and its COMMIT, the client killed")
    line(
        "A writes the instance again",
        (f"after {took:.1f} s" if took is not None else "never (40 s)")
        + " once the link is up: "
        + ", ".join(f"{k} {n}" for k, n in sorted(tries.items())),
    )
    line("transactions left idle on the server", str(left[0] if left else "?"))
