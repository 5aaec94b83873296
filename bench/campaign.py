"""The reliability campaign of issue 11: load, faults, hostile input and two hosts, over the
SQLite and the PostgreSQL instance stores (engine.md §7.1, §10).

    python bench/campaign.py load        # 8 processes x 500 fires on shared instances
    python bench/campaign.py faults      # kill -9 in 1,000 (SQLite) / 300 (PostgreSQL) fires;
                                         # the server stopped with -m immediate and restarted
    python bench/campaign.py fuzz        # 10,000 machine files, 10,000 fire argument sets
    python bench/campaign.py twohosts    # two network namespaces, a veth pair, a link cut
    python bench/campaign.py all         # every one of them
    ... --quick                          # the CI size (all of them together in ~3 minutes)

A gate, not a report: each subcommand prints its figures per backend and exits 1 when an
invariant is violated (each violation is printed, `VIOLATION: …`), 0 otherwise.

The invariants:
- every instance's history is versions 1..V without a gap, V being its version, and the
  instance row agrees with its last history record (state, status), no record without its
  instance, no holder on a paused or completed instance;
- 0 torn records: every row's JSON parses and agrees with the columns beside it (instances),
  history records and sessions parse;
- the history equals the accepted calls: per session, the (ref, event) of its records in time
  order are exactly its calls that exited 0 (load, two hosts); under faults, the calls that
  returned 0 are all there, in order, and the only extra records are those of calls that were
  killed, or whose commit's outcome smllm said it couldn't know;
- every refused call got an `error:` of engine.md §7.1 or §10 (`another session changed …`, `…
  moved to session …`, `another issue of dev already has ref …`, `the store is busy`), exit 1;
  under load never exit 2; under faults exit 2 only with a store error (`the store at HOST is
  unreachable: …`, `… dropped the connection during a commit …`); never a traceback or an
  internal error;
- hostile input: no traceback, no internal error, no hang; every failure is a finding of the
  machine file or an `error:` line.

The PostgreSQL server is a throw-away cluster (tests/helpers/pgserver.py) started here and
removed at the end; the two-host run needs root (`ip netns`), and removes its namespaces and
veth pair whatever happens. Stdlib, smllm, psycopg and hypothesis.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TESTS = ROOT / "tests"
for _path in (str(TESTS), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

PG_ENV = "SMLLM_CAMPAIGN_PG"
MACHINE = "dev"
KIND = "issue"
BACKENDS = ("sqlite", "postgres")

Call = dict[str, Any]
Record = dict[str, Any]


class Size(NamedTuple):
    load_procs: int
    load_fires: int
    load_refs: int
    kill_fires_sqlite: int
    kill_fires_pg: int
    pg_stops: int
    fuzz_machines: int
    fuzz_fires: int
    fuzz_samples: int
    hosts_procs: int
    hosts_seconds: float
    hosts_cut_seconds: float


FULL = Size(8, 500, 4, 1000, 300, 5, 10_000, 10_000, 100, 3, 30.0, 20.0)
QUICK = Size(4, 50, 3, 120, 60, 2, 300, 300, 10, 2, 6.0, 12.0)


# -- reporting ----------------------------------------------------------------------------------


class Verdict:
    """The violations found so far, printed as they come."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.fail(what)
        return ok

    def fail(self, what: str) -> None:
        self.violations.append(what)
        if len(self.violations) <= 50:
            print(f"  VIOLATION: {what}", flush=True)

    def extend(self, found: list[str], where: str) -> None:
        for f in found:
            self.fail(f"{where}: {f}")


def heading(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 86 - len(title)), flush=True)


def line(label: str, text: str) -> None:
    print(f"  {label:<34} {text}", flush=True)


def ms_stats(values: list[float]) -> str:
    if not values:
        return "-"
    s = sorted(values)
    p99 = s[min(len(s) - 1, max(0, int(0.99 * len(s) + 0.5) - 1))]
    return f"median {statistics.median(s):.1f} ms, p99 {p99:.1f} ms, max {s[-1]:.1f} ms"


# -- replies ------------------------------------------------------------------------------------

#: engine.md §7.1 and §10: what a refused call may be told (exit 1)
REFUSALS = {
    "lost": re.compile(r"^error: another session changed issue \S+; you are in idle$", re.M),
    "moved": re.compile(r"^error: issue \S+ moved to session \S+; you are in idle$", re.M),
    "status": re.compile(
        r"^error: issue \S+ is (paused|completed|interrupted); you are in idle$", re.M
    ),
    "ref-taken": re.compile(r"^error: another issue of dev already has ref \S+$", re.M),
    "gone": re.compile(r"^error: instance \S+ no longer exists; you are in idle$", re.M),
    "busy": re.compile(r"^error: the store is busy", re.M),
    "not-offered": re.compile(r"^error: \w+ is not offered (in idle|here)", re.M),
}
#: a store that can't be used (exit 2): the outage of faults and two hosts
STORE_ERRORS = {
    "unreachable": re.compile(r"^error: the store at \S+ is unreachable: \S.*$", re.M),
    "unknown-commit": re.compile(
        r"^error: the store at \S+ dropped the connection during a commit, and can't be asked",
        re.M,
    ),
    "dropped": re.compile(
        r"^error: the store at \S+ dropped the connection during a commit, which was not saved",
        re.M,
    ),
    "gave-up": re.compile(r"^error: the store at \S+ gave up: ", re.M),
    "refused": re.compile(r"^error: the store at \S+ refused the connection: ", re.M),
}


def classify(code: int, out: str, err: str) -> str:
    """A reply in a word: `ok`, a REFUSALS or STORE_ERRORS key, or `bad:…` (a violation
    wherever it appears)."""
    text = out + err
    if "Traceback" in text or "internal error" in text:
        return "bad:traceback"
    if code == 0:
        return "ok"
    if code == 1:
        for kind, pattern in REFUSALS.items():
            if pattern.search(text):
                return kind
        return "bad:exit-1-unknown"
    if code == 2:
        for kind, pattern in STORE_ERRORS.items():
            if pattern.search(err):
                return kind
        return "bad:exit-2-unknown"
    return f"bad:exit-{code}"


def first_error(out: str, err: str) -> str:
    for text in (err, out):
        for ln in text.splitlines():
            if ln.startswith("error:"):
                return ln[:200]
    return (err or out).strip().splitlines()[-1][:200] if (err or out).strip() else ""


# -- running smllm --------------------------------------------------------------------------------


def run_inproc(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """The real CLI entry point in this process, output captured."""
    from smllm.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_in = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogateescape")))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's own exits
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = saved_in
    return code, out.getvalue(), err.getvalue()


def run_cli(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float = 60,
    prefix: list[str] | None = None,
) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(
            [*(prefix or []), sys.executable, "-m", "smllm", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"hang: still running after {timeout} s"
    return proc.returncode, proc.stdout, proc.stderr


def enter_argv(key: str, ref: str) -> list[str]:
    return [
        "fire",
        "--session",
        key,
        "enter",
        "--param",
        f"stateMachine={MACHINE}",
        "--param",
        f"issueId={ref}",
    ]


# -- the world: a PostgreSQL server, projects with their own XDG folders --------------------------


class Project(NamedTuple):
    backend: str
    folder: Path
    env: dict[str, str]
    namespace: str
    url: str  # the PostgreSQL URL ('' for SQLite)


class World:
    """A temp folder, a PostgreSQL server started on first need, and projects."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server: Any = None
        self.count = 0

    def pg(self) -> Any:
        if self.server is None:
            from helpers.pgserver import PgServer

            t0 = time.monotonic()
            self.server = PgServer.start(self.root / "pg")
            line(
                "PostgreSQL server",
                f"started in {time.monotonic() - t0:.1f} s, port {self.server.port}",
            )
        return self.server

    def project(self, backend: str, url: str = "", name: str = "") -> Project:
        """A fresh copy of the example project with XDG folders and HOME of its own: a user on a
        machine. On PostgreSQL its config names the server by `url-env`, in a new namespace."""
        from smllm.cli.demo import copy_example

        self.count += 1
        name = name or f"{backend}-{self.count}"
        base = self.root / name
        folder = base / "project"
        folder.mkdir(parents=True)
        copy_example(str(folder))
        env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
        for var in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME"):
            path = base / var.lower()
            path.mkdir()
            env[var] = str(path)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        namespace = ""
        if backend == "postgres":
            url = url or self.pg().url()
            namespace = f"campaign-{os.getpid()}-{self.count}"
            env[PG_ENV] = url
            config = folder / ".smllm" / "config.toml"
            config.write_text(
                config.read_text() + f'\n[state]\nurl-env = "{PG_ENV}"\nnamespace = "{namespace}"\n'
            )
        return Project(backend, folder, env, namespace, url)

    def close(self) -> None:
        if self.server is not None:
            self.server.remove()
            self.server = None


def twin(p: Project, world: World, name: str) -> Project:
    """Another user (XDG folders and HOME of its own) on the same store as P."""
    q = world.project(p.backend, p.url, name)
    if p.backend == "sqlite":
        # the same SQLite store: q's config points at p's state folder
        config = q.folder / ".smllm" / "config.toml"
        config.write_text(
            config.read_text() + f'\n[state]\ndir = "{p.folder / ".smllm" / "state"}"\n'
        )
        return q
    config = q.folder / ".smllm" / "config.toml"
    config.write_text(config.read_text().replace(q.namespace, p.namespace))
    return q._replace(namespace=p.namespace)


# -- reading a store straight from its tables -----------------------------------------------------


class Snapshot(NamedTuple):
    instances: dict[str, Record]
    history: dict[str, list[Record]]
    torn: list[str]  # rows whose JSON doesn't parse or disagrees with its columns
    rows: int  # instance and history rows read

    @property
    def records(self) -> int:
        return sum(len(h) for h in self.history.values())

    def ref_of(self, instance_id: str) -> str:
        inst = self.instances.get(instance_id)
        return str(inst["ref"]) if inst else "?"


def _snapshot(
    inst_rows: list[tuple[Any, ...]], hist_rows: list[tuple[str, str]], holder_column: bool
) -> Snapshot:
    instances: dict[str, Record] = {}
    history: dict[str, list[Record]] = {}
    torn: list[str] = []
    for id_, machine, ref, status, holder, updated, version, data in inst_rows:
        try:
            d = json.loads(data)
        except ValueError as exc:
            torn.append(f"instance {id_}: its JSON doesn't parse ({exc})")
            continue
        columns = {
            "id": id_,
            "machine": machine,
            "ref": ref,
            "status": status,
            "updated": updated,
            "version": version,
        }
        if holder_column:
            columns["holder"] = holder
        for k, v in columns.items():
            if d.get(k) != v:
                torn.append(f"instance {id_}: column {k}={v!r} but its JSON says {d.get(k)!r}")
        instances[id_] = d
        history[id_] = []
    for instance, data in hist_rows:
        try:
            rec = json.loads(data)
        except ValueError as exc:
            torn.append(f"a history record of {instance} doesn't parse ({exc})")
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("version"), int):
            torn.append(f"a history record of {instance} isn't one: {data[:100]}")
            continue
        history.setdefault(instance, []).append(rec)
    return Snapshot(instances, history, torn, len(inst_rows) + len(hist_rows))


def sqlite_db(p: Project) -> Path:
    return p.folder / ".smllm" / "state" / "smllm.db"


def read_store(p: Project) -> Snapshot:
    """Every instance and history record of P's store (its namespace, on PostgreSQL)."""
    if p.backend == "sqlite":
        db = sqlite_db(p)
        if not db.exists():
            return Snapshot({}, {}, [], 0)
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            check = conn.execute("PRAGMA integrity_check").fetchall()
            if check != [("ok",)]:
                return Snapshot({}, {}, [f"integrity_check: {check[:3]}"], 0)
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                return Snapshot({}, {}, [], 0)
            inst = conn.execute(
                "SELECT id, machine, ref, status, NULL, updated, version, data FROM instances"
            ).fetchall()
            hist = conn.execute("SELECT instance, data FROM history ORDER BY seq").fetchall()
        finally:
            conn.close()
        return _snapshot(inst, hist, holder_column=False)
    import psycopg

    with psycopg.connect(p.url, connect_timeout=10) as conn:
        if conn.execute("SELECT to_regclass('smllm.instances')").fetchone() == (None,):
            return Snapshot({}, {}, [], 0)
        inst = conn.execute(
            "SELECT id, machine, ref, status, holder, updated, version, data FROM smllm.instances "
            "WHERE namespace = %s",
            (p.namespace,),
        ).fetchall()
        hist = conn.execute(
            "SELECT instance, data FROM smllm.history WHERE namespace = %s ORDER BY seq",
            (p.namespace,),
        ).fetchall()
    return _snapshot(inst, hist, holder_column=True)


def read_sessions(p: Project) -> tuple[int, list[str]]:
    """The sessions of P's user store: how many, and the torn ones."""
    db = Path(p.env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    if not db.exists():
        return 0, []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    torn = []
    try:
        rows = conn.execute("SELECT key, data FROM sessions").fetchall()
        for key, data in rows:
            try:
                if json.loads(data).get("key") != key:
                    torn.append(f"session {key}: its JSON names another key")
            except ValueError as exc:
                torn.append(f"session {key}: its JSON doesn't parse ({exc})")
        for (data,) in conn.execute("SELECT data FROM audit"):
            try:
                json.loads(data)
            except ValueError as exc:
                torn.append(f"an audit record doesn't parse ({exc})")
    finally:
        conn.close()
    return len(rows), torn


# -- the checks -----------------------------------------------------------------------------------


def check_histories(instances: dict[str, Record], history: dict[str, list[Record]]) -> list[str]:
    """engine.md §10 on the records: versions 1..V without a gap, the instance at V and as its
    last record says; no record without its instance; a holder only while active/interrupted."""
    out = []
    for id_ in history:
        if id_ not in instances:
            out.append(f"history records of {id_}, which doesn't exist")
    for id_, inst in instances.items():
        h = history.get(id_, [])
        versions = [r.get("version") for r in h]
        if versions != list(range(1, len(h) + 1)):
            gaps = [v for a, v in zip(range(1, len(h) + 1), versions, strict=False) if a != v][:5]
            out.append(
                f"{id_} ({inst.get('ref')}): history versions are not 1..{len(h)} (first "
                f"off: {gaps})"
            )
            continue
        if not h:
            out.append(f"{id_} ({inst.get('ref')}): no history record")
            continue
        last = h[-1]
        if inst.get("version") != len(h):
            out.append(f"{id_}: version {inst.get('version')} but {len(h)} history records")
        if inst.get("state") != last.get("to") or inst.get("status") != last.get("status"):
            out.append(
                f"{id_}: the row says {inst.get('state')}/{inst.get('status')}, its last record "
                f"{last.get('to')}/{last.get('status')}"
            )
        if h[0].get("from") is not None or h[0].get("event") != "enter":
            out.append(f"{id_}: its first record is not the enter that made it")
        if inst.get("status") in ("paused", "completed") and inst.get("holder") is not None:
            out.append(f"{id_}: {inst.get('status')} but held by {inst.get('holder')}")
        if inst.get("status") == "active" and not inst.get("holder"):
            out.append(f"{id_}: active without a holder")
    return out


def session_records(snap: Snapshot) -> dict[str, list[tuple[str, str, str]]]:
    """Each session's history records as (at, ref, event), in time order."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for id_, recs in snap.history.items():
        ref = snap.ref_of(id_)
        for r in recs:
            out.setdefault(str(r.get("session")), []).append(
                (str(r.get("at")), ref, str(r.get("event")))
            )
    for recs in out.values():
        recs.sort()
    return out


def check_calls(
    calls: list[Call], snap: Snapshot, extra_ok: Callable[[Call], bool] | None = None
) -> list[str]:
    """The history against the calls (each call: s session, r ref, e event, k kind, in each
    session's order). Without `extra_ok`: per session the records are exactly the accepted
    calls. With it: the accepted calls are all there in order, and each extra record is
    matched by a call for which `extra_ok` says its commit may have landed (a killed call, an
    unknown outcome), at most one record each."""
    out = []
    by_session: dict[str, list[Call]] = {}
    for c in calls:
        if c.get("s"):
            by_session.setdefault(c["s"], []).append(c)
    records = session_records(snap)
    for key in sorted(set(by_session) | set(records)):
        mine = by_session.get(key, [])
        recs = [(ref, ev) for _, ref, ev in records.get(key, [])]
        if extra_ok is None:
            accepted = [(c["r"], c["e"]) for c in mine if c["k"] == "ok"]
            if accepted != recs:
                n = next(
                    (i for i, (a, b) in enumerate(zip(accepted, recs, strict=False)) if a != b),
                    min(len(accepted), len(recs)),
                )
                out.append(
                    f"session {key}: {len(accepted)} accepted calls but {len(recs)} history "
                    f"records; first difference at #{n}: call {accepted[n : n + 1]} record "
                    f"{recs[n : n + 1]}"
                )
            continue
        # the records must be the accepted calls in order, with any of the maybe-landed ones
        # among them: the set of record positions the calls so far can have reached
        reach = {0}
        for n, c in enumerate(mine):
            want = (c["r"], c["e"])
            step = {j + 1 for j in reach if j < len(recs) and recs[j] == want}
            if c["k"] == "ok":
                reach = step
            elif extra_ok(c):
                reach |= step
            if not reach:
                out.append(
                    f"session {key}: accepted call {want} (#{n}) is not in the history where "
                    "it belongs"
                )
                break
        else:
            if len(recs) not in reach:
                out.append(
                    f"session {key}: {len(recs) - max(reach)} history records no call accounts "
                    f"for: {recs[max(reach) : max(reach) + 3]}"
                )
    return out


def check_replies(calls: list[Call], allowed: set[str]) -> tuple[Counter[str], list[str]]:
    kinds: Counter[str] = Counter(c["k"] for c in calls)
    bad = [
        f"{c.get('s')} {c['e']} {c['r']} → exit {c['c']} ({c['k']}): {c.get('m', '')}"
        for c in calls
        if c["k"] not in allowed
    ]
    return kinds, bad[:20] + ([f"... and {len(bad) - 20} more"] if len(bad) > 20 else [])


# -- the worker: one process, one session, firing in a loop ----------------------------------------


def worker(spec: dict[str, Any]) -> None:
    """`campaign.py _worker SPEC`: fire `rounds` calls (or for `seconds`) on the shared refs
    through the real CLI entry point in this process, one JSON line per returned call in `log`.

    From idle it enters a random ref (a takeover when another session holds it); holding one it
    yields (or pauses, one call in five). An accepted call leaves it holding the ref (or not,
    after pause); a refusal puts it in idle (§7.1); a store error (exit 2) leaves it unsure,
    so it next yields on that ref, which settles it."""
    import importlib

    os.chdir(spec["project"])
    modules = ["smllm.api.app", "smllm.cli.commands", "smllm.cli.main", "smllm.engine.fire"]
    if os.environ.get(PG_ENV):
        modules.append("psycopg")  # so that kills land in fires, not in this import
    for module in modules:
        importlib.import_module(module)
    rng = random.Random(spec["seed"])
    key = spec.get("session")
    if not key:
        code, out, err = run_inproc(["session", "new", "--json"])
        if code != 0:
            raise SystemExit(f"worker: session new failed ({code}): {out}{err}")
        key = json.loads(out)["session"]
    refs: list[str] = spec["refs"]
    log = open(spec["log"], "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    log.write(json.dumps({"ready": key}) + "\n")
    if spec.get("go"):
        end = time.monotonic() + 120
        while not os.path.exists(spec["go"]):
            if time.monotonic() > end:
                raise SystemExit("worker: no go")
            time.sleep(0.001)
    holding: str | None = spec.get("holding")
    unsure = False
    rounds = spec.get("rounds") or 10**9
    stop_at = time.monotonic() + float(spec.get("seconds") or 10**9)
    pause_share = float(spec.get("pause", 0.2))
    stop_file = spec.get("stop")
    for _ in range(rounds):
        if time.monotonic() > stop_at or (stop_file and os.path.exists(stop_file)):
            break
        if holding is not None:
            ref = holding
            event = "yield" if unsure or rng.random() >= pause_share else "pause"
            argv = ["fire", "--session", key, event]
        else:
            ref = rng.choice(refs)
            event = "enter"
            argv = enter_argv(key, ref)
        log.write(json.dumps({"intent": [key, event, ref]}) + "\n")
        t0 = time.time()
        code, out, err = run_inproc(argv)
        t1 = time.time()
        kind = classify(code, out, err)
        call = {"s": key, "e": event, "r": ref, "c": code, "k": kind, "t0": t0, "t1": t1}
        if kind != "ok":
            call["m"] = first_error(out, err)
        log.write(json.dumps(call) + "\n")
        if code == 2:
            holding, unsure = ref, True  # its commit may or may not have landed
        elif code == 0:
            holding, unsure = (None if event == "pause" else ref), False
        else:
            holding, unsure = None, False
        if spec.get("gap_s"):
            time.sleep(rng.uniform(0, float(spec["gap_s"])))


def read_log(path: Path) -> tuple[list[Call], list[str]]:
    """The calls of a worker's log, and its session keys. A call announced but never finished
    (the process was killed during it) is there as kind `killed`."""
    calls: list[Call] = []
    keys: list[str] = []
    if not path.exists():
        return calls, keys
    pending: list[str] | None = None
    for ln in path.read_text().splitlines():
        try:
            d = json.loads(ln)
        except ValueError:
            continue  # a line the kill cut short
        if "ready" in d:
            keys.append(d["ready"])
        elif "intent" in d:
            pending = d["intent"]
        else:
            calls.append(d)
            pending = None
    if pending is not None:
        key, event, ref = pending
        calls.append({"s": key, "e": event, "r": ref, "c": -9, "k": "killed"})
    return calls, keys


def spawn(
    spec: dict[str, Any], env: dict[str, str], prefix: list[str] | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(prefix or []),
            sys.executable,
            str(Path(__file__).resolve()),
            "_worker",
            json.dumps(spec),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_ready(logs: list[Path], procs: list[subprocess.Popen[bytes]], limit: float = 120) -> None:
    end = time.monotonic() + limit
    while not all(read_log(p)[1] for p in logs):
        for proc in procs:
            if proc.poll() not in (None, 0):
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"a worker died before it was ready: {err[-2000:]}")
        if time.monotonic() > end:
            raise RuntimeError("workers never got ready")
        time.sleep(0.01)


def finish(procs: list[subprocess.Popen[bytes]], v: Verdict, limit: float = 600) -> None:
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            v.fail("a worker hung")
            continue
        if proc.returncode != 0:
            v.fail(f"a worker exited {proc.returncode}: {err.decode()[-1500:]}")


# -- load ------------------------------------------------------------------------------------------


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


# -- faults ----------------------------------------------------------------------------------------


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


# -- hostile input ---------------------------------------------------------------------------------

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
    fuzz_property.check_source: findings with lines, a machine only without errors, the
    engine's use of a machine that loads), `samples` of them through `smllm validate`."""
    import fuzz_property
    from fuzz_strategies import mutated_machines, mutated_texts, random_machines
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


# -- two hosts -------------------------------------------------------------------------------------

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
        v.fail("two hosts: needs root and `ip` (iproute2) for network namespaces")
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


# -- main ------------------------------------------------------------------------------------------

COMMANDS: dict[str, Callable[[World, Size, Verdict], None]] = {
    "load": load,
    "faults": faults,
    "fuzz": fuzz,
    "twohosts": twohosts,
}


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["_worker"]:
        worker(json.loads(args_in[1]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=[*COMMANDS, "all"])
    ap.add_argument("--quick", action="store_true", help="the CI size")
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    ap.add_argument("--fuzz-cases", type=int, default=None, help="fuzz cases of each kind")
    args = ap.parse_args(args_in)
    size = QUICK if args.quick else FULL
    if args.fuzz_cases:
        size = size._replace(fuzz_machines=args.fuzz_cases, fuzz_fires=args.fuzz_cases)
    began = time.monotonic()
    print(f"smllm reliability campaign: {args.command}" + (" (--quick)" if args.quick else ""))
    root = Path(tempfile.mkdtemp(prefix="smllm-campaign-", dir=args.dir))
    world = World(root)
    v = Verdict()
    try:
        for name in COMMANDS if args.command == "all" else [args.command]:
            COMMANDS[name](world, size, v)
    finally:
        world.close()
        if args.keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)
    heading("verdict")
    took = time.monotonic() - began
    if v.violations:
        print(f"  FAIL: {len(v.violations)} violated invariants ({took:.0f} s)")
        return 1
    print(f"  PASS: every invariant held ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
