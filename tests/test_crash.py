"""Crash safety (engine.md §10): `fire` killed with SIGKILL at random points of its commits.

A helper process (tests/helpers/crasher.py) fires writing events through `smllm.api.app.App` in
a loop, from two sessions on one issue, with its SQLite and PostgreSQL transactions slowed down
by a test-only hook (tests/helpers/slowdb.py, installed in the helper process only) so that
kills land inside commits and between the instance commit and the session commit. The test
kills it 50 times (20 on PostgreSQL) after seeded random delays. Every test runs with the
instance store on both backends (conftest's `store_project`: the SQLite file, or a namespace of
a real PostgreSQL server, read through tests/helpers/storerows.py); the user store is SQLite.
After each kill:

- both stores open and are whole (SQLite: `PRAGMA integrity_check`; PostgreSQL: the
  constraints' promises checked by queries);
- every record's JSON parses, and the columns beside it agree with it;
- each instance's history versions are exactly 1..V, V being its version, and its state and
  status are those of its last history record (the instance write and its history record
  commit together, §10 Atomic);
- every call the helper saw return is in the history (a commit that returned survives), and at
  most one more record is there (the call in flight, whose instance commit had returned);
- sessions agree with the instances, or disagree only in the ways §10 allows (below);
- then the next event of each disagreeing session, fired through the real CLI, succeeds or gets
  a §7.1 (or §5.2 clean-up) message, never exit 2 or a traceback, and repairs the session.

Which disagreements engine.md §10 allows. smllm commits a call in two stores, one after the
other: the instance (with its history) in the config's store first, then the session (with its
audit) in the user store. "The instance record is the truth: a session that disagrees with it
after a crash is repaired by §7.1 on its next call." So after a kill between the two commits:

- *stale holding*: the session's `holding` names an instance whose holder is another session or
  whose status isn't `active` (a `pause` or `unmatched` whose session write was lost; this one
  also happens without a crash, after a takeover). Its next call gets the §7.1 message and
  returns it to idle.
- *stale slot*: the session's interrupted slot names an instance that is no longer interrupted
  by it (a `resume` whose session write was lost; also after a takeover). `resume` empties it
  (the §5.2 clean-up).
- *orphan*: the instance is `active` (or `interrupted`) with this session as holder, but the
  session doesn't hold it (or has no slot for it): an `enter`/`resume` (or `unmatched`) whose
  session write was lost. Only the session's own last event can cause it, so the instance's last
  history record must be that session's. The session's next call (or view) takes it back
  (engine/recover.py): the session holds it again (or has it in its slot), audit `moved`.

A session never names an instance that doesn't exist (the instance commits first).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, require_tool, smllm
from helpers.storerows import StoreRows, fresh_database

CRASHER = ROOT / "helpers" / "crasher.py"
KILLS = {"sqlite": 50, "postgres": 20}
SEED = 20261202
REF = "GH-1"

Record = dict[str, Any]

#: the replies a session's next call may get after a crash (exit 1): §7.1, and §5.2's clean-ups
REPAIR_MESSAGES = (
    f"error: issue {REF} moved to session sm-",
    f"error: issue {REF} is paused; you are in idle",
    f"error: issue {REF} is interrupted; you are in idle",
    f"error: issue {REF} is completed; you are in idle",
    "error: the interrupted instance is no longer interrupted",
    f"error: {REF} moved to session sm-",
)


# -- reading the stores ------------------------------------------------------------------------


def open_ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, timeout=5)


def integrity(db: Path, cli: bool) -> None:
    conn = open_ro(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], db
        if conn.execute("PRAGMA user_version").fetchone()[0] >= 1:
            # smllm sets WAL before it makes the tables
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal", db
    finally:
        conn.close()
    if cli:
        sqlite_cli = require_tool("sqlite3", "apt-get install sqlite3")
        proc = subprocess.run(
            [sqlite_cli, str(db), "PRAGMA integrity_check;"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


def store_sound(rows: StoreRows) -> None:
    """The instance store opens and is whole (SQLite: as `integrity` checks it)."""
    if rows.path is not None:
        integrity(rows.path, cli=True)
    else:
        assert rows.integrity() == "ok"


class Snapshot:
    """Both stores as they are, checked record by record: the instance store through
    storerows (either backend), the user store's SQLite file."""

    def __init__(self, rows: StoreRows, user_db: Path) -> None:
        self.instances: dict[str, Record] = {}
        self.history: dict[str, list[Record]] = {}
        self.sessions: dict[str, Record] = {}
        self.audit_events: Counter[str] = Counter()
        if rows.exists():
            for d in rows.instance_rows():  # each row's columns agree with its document
                self.instances[d["id"]] = d
                self.history[d["id"]] = []
            for instance, record in rows.all_history():
                assert instance in self.instances, instance  # no record without its instance
                self.history[instance].append(record)
        conn = open_ro(user_db)
        try:
            for key, data in conn.execute("SELECT key, data FROM sessions"):
                d = json.loads(data)
                assert d["key"] == key
                self.sessions[key] = d
            for session, kind, data in conn.execute("SELECT session, kind, data FROM audit"):
                json.loads(data)
                if kind == "event":
                    self.audit_events[session] += 1
        finally:
            conn.close()

    @property
    def history_count(self) -> int:
        return sum(len(h) for h in self.history.values())

    def check_instances(self) -> None:
        assert len(self.instances) <= 1  # one issue, made once
        for id_, inst in self.instances.items():
            history = self.history[id_]
            assert history, id_  # an instance is created with its first record
            assert [h["version"] for h in history] == list(range(1, len(history) + 1)), id_
            assert inst["version"] == history[-1]["version"]
            assert inst["state"] == history[-1]["to"]
            assert inst["status"] == history[-1]["status"]
            assert history[0]["from"] is None and history[0]["event"] == "enter"
            if inst["status"] in ("active", "interrupted"):
                assert inst["holder"] in self.sessions
            else:
                assert inst["holder"] is None

    def disagreements(self, key: str) -> list[str]:
        """How session `key` and the instances disagree (each kind allowed by §10, see top)."""
        s = self.sessions[key]
        found = []
        for slot, name in (("holding", "stale holding"), ("interrupted", "stale slot")):
            place = s[slot]
            if place is None:
                continue
            inst = self.instances.get(place["id"])
            assert inst is not None, (key, slot, place)  # the instance commits first
            assert inst["machine"] == place["machine"]
            wanted = "active" if slot == "holding" else "interrupted"
            if inst["holder"] != key or inst["status"] != wanted:
                found.append(name)
        for id_, inst in self.instances.items():
            if inst["holder"] != key:
                continue
            place = {"machine": inst["machine"], "id": id_}
            slot = "holding" if inst["status"] == "active" else "interrupted"
            if s[slot] != place:
                # only a lost session write of this session's own last event leaves this
                assert self.history[id_][-1]["session"] == key, (key, inst)
                found.append(f"orphan {inst['status']}")
        return found


# -- the test ----------------------------------------------------------------------------------


def next_event(snap: Snapshot, key: str) -> list[str]:
    """What the agent of session `key` would fire next, as `smllm fire` arguments: what its
    view shows, and a view of an idle session shows the instances it holds by their records
    (engine/recover.py)."""
    s = snap.sessions[key]
    held = {i["status"] for i in snap.instances.values() if i["holder"] == key}
    if s["holding"] is not None or "active" in held:
        return ["yield"]
    if s["interrupted"] is not None or "interrupted" in held:
        return ["resume"]
    return ["enter", "--param", "stateMachine=dev", "--param", f"issueId={REF}"]


def test_sigkill_during_commits(
    store_project: Path, env: dict[str, str], tmp_path: Path, backend: str
) -> None:
    project = store_project
    began = time.monotonic()
    rows = StoreRows.of(project, env)
    kills = KILLS[backend]
    user_db = Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    keys = []
    for _ in range(2):
        ran = smllm(["session", "new", "--json"], project, env)
        assert ran.code == 0, ran.err
        keys.append(json.loads(ran.out)["session"])
    # the first run also creates the instance store (on PostgreSQL, the namespace's first rows)
    assert not rows.exists() if backend == "sqlite" else rows.count() == 0

    rng = random.Random(SEED)
    phases: Counter[str] = Counter()
    found: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    in_flight_landed = 0  # kills after an instance commit whose call hadn't returned
    gap = 0  # history records whose session write (and audit) a kill lost
    calls_done = 0
    for k in range(kills):
        before = Snapshot(rows, user_db) if rows.exists() else None
        log = tmp_path / f"log-{k}.jsonl"
        phase_file = tmp_path / f"phase-{k}"
        slow = {"seed": SEED + k, "max_ms": 12, "phase": str(phase_file)}
        spec = {
            "project": str(project),
            "sessions": keys,
            "ref": REF,
            "seed": SEED * 100 + k,
            "log": str(log),
            "limit_s": 20,
        }
        proc = subprocess.Popen(
            [sys.executable, str(CRASHER), json.dumps(spec)],
            env={**env, "SMLLM_TEST_SLOWDB": json.dumps(slow)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if k % 10 != 0:
            # most kills count from the helper's first call; one in ten from its start
            deadline = time.monotonic() + 20
            while read_phase(phase_file) in ("", "starting"):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the crasher never got ready"
                time.sleep(0.001)
        time.sleep(rng.uniform(0.003, 0.3))
        assert proc.poll() is None, proc.communicate()  # it must not stop by itself
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        phase = read_phase(phase_file) or "not started"
        phases[phase] += 1

        # the stores open and are whole
        integrity(user_db, cli=True)
        if not rows.exists():
            assert before is None
            continue
        store_sound(rows)
        snap = Snapshot(rows, user_db)
        snap.check_instances()

        # every call that returned is in the history; at most the one in flight more
        returned = []
        for line in log.read_text().splitlines() if log.exists() else []:
            # a line the kill cut short is the call in flight
            with contextlib.suppress(json.JSONDecodeError):
                returned.append(json.loads(line))
        calls_done += len(returned)
        accepted = sum(r["ok"] for r in returned)
        extra = snap.history_count - (before.history_count if before else 0) - accepted
        assert extra in (0, 1), (extra, phase, returned[-3:])
        in_flight_landed += extra
        # the session write (with its audit) of at most that one call is missing
        new_gap = snap.history_count - sum(snap.audit_events.values())
        assert new_gap - gap in (0, extra), (gap, new_gap, extra)
        gap = new_gap

        # sessions agree with the instances, or disagree as §10 allows; each disagreeing
        # session's next call, through the real CLI, repairs it
        wrong = {key: snap.disagreements(key) for key in keys}
        for kinds in wrong.values():
            found.update(kinds)
        to_fire = [key for key in keys if wrong[key]] or [rng.choice(keys)]
        for key in to_fire:
            for _attempt in range(3):
                ran = smllm(["fire", "--session", key, *next_event(snap, key)], project, env)
                assert ran.code in (0, 1), (ran.code, ran.out, ran.err)
                assert ran.err == "" and "Traceback" not in ran.out, ran.err
                if ran.code == 0:
                    repairs["accepted"] += 1
                else:
                    msg = next((m for m in REPAIR_MESSAGES if m in ran.out), None)
                    assert msg is not None, ran.out
                    repairs[msg.split("error: ", 1)[1].split(" sm-")[0]] += 1
                snap = Snapshot(rows, user_db)
                snap.check_instances()
                if not snap.disagreements(key):
                    break
            else:
                raise AssertionError(f"session {key} still disagrees: {snap.disagreements(key)}")
        after = Snapshot(rows, user_db)
        # repairs wrote full calls: the instance and the session together
        assert after.history_count - sum(after.audit_events.values()) == gap

    took = time.monotonic() - began
    print(
        f"\n[sigkill, {backend}] {kills} kills in {took:.1f} s, {calls_done} calls returned "
        "in the helper; "
        f"killed at: {dict(sorted(phases.items()))}; history records whose call was cut short "
        f"after its instance commit: {in_flight_landed} (session write lost: {gap}); "
        f"disagreements seen: {dict(found)}; repair calls: {dict(repairs)}"
    )
    # the kills really landed inside transactions and between the two commits
    assert sum(n for p, n in phases.items() if p.startswith(("in-tx", "committ", "wait"))) >= (
        kills // 5
    )


def read_phase(path: Path) -> str:
    """Where the helper was (tests/helpers/slowdb.py writes it at offset 0)."""
    try:
        return path.read_bytes()[:40].decode(errors="replace").strip()
    except OSError:
        return ""


# -- a kill exactly between the two commits, event by event ------------------------------------

ENTER = ["enter", "--param", "stateMachine=dev", "--param", f"issueId={REF}"]

#: case → (set-up calls, the killed call, the disagreements then, the repair calls).
#: Sessions are "A" and "B"; a call is (session, args); a repair is (session, args, exit code,
#: a text its reply must hold). The killed call's instance commit returned; its session commit
#: never ran.
Step = tuple[str, list[str]]
Repair = tuple[str, list[str], int, str]
Case = tuple[list[Step], Step, dict[str, list[str]], list[Repair]]
CASES: dict[str, Case] = {
    "enter-new": (
        [],
        ("A", ENTER),
        {"A": ["orphan active"], "B": []},
        [("A", ["yield"], 0, "Yielded: staying in PLAN.")],
    ),
    "takeover": (
        [("A", ENTER)],
        ("B", ENTER),
        {"A": ["stale holding"], "B": ["orphan active"]},
        [
            ("A", ["yield"], 1, f"error: issue {REF} moved to session {{B}}; you are in idle"),
            ("B", ["yield"], 0, "Yielded: staying in PLAN."),
        ],
    ),
    "pause": (
        [("A", ENTER)],
        ("A", ["pause"]),
        {"A": ["stale holding"], "B": []},
        [
            ("A", ["yield"], 1, f"error: issue {REF} is paused; you are in idle"),
            ("A", ENTER, 0, "Arrived by: enter\n"),
        ],
    ),
    "unmatched": (
        [("A", ENTER)],
        ("A", ["unmatched"]),
        {"A": ["stale holding", "orphan interrupted"], "B": []},
        [
            ("A", ["yield"], 1, f"error: issue {REF} is interrupted; you are in idle"),
            ("A", ["resume"], 0, "Arrived by: resume\n"),
        ],
    ),
    "resume": (
        [("A", ENTER), ("A", ["unmatched"])],
        ("A", ["resume"]),
        {"A": ["stale slot", "orphan active"], "B": []},
        [("A", ["yield"], 0, "Yielded: staying in PLAN.")],
    ),
    "yield": (
        [("A", ENTER)],
        ("A", ["yield"]),
        {"A": [], "B": []},
        [("A", ["yield"], 0, "Yielded: staying in PLAN.")],
    ),
}


def as_params(args: list[str]) -> list[list[str]]:
    """`--param N=V` pairs of CLI arguments as the crasher's [[N, V], …]."""
    return [args[i + 1].split("=", 1) for i in range(len(args)) if args[i] == "--param"]


def kill_at_phase(
    spec: Record, slow: Record, env: dict[str, str], phase_file: Path, phase: str
) -> None:
    """Run the crasher with a slowed store, and SIGKILL it once it reports `phase`."""
    proc = subprocess.Popen(
        [sys.executable, str(CRASHER), json.dumps(spec)],
        env={**env, "SMLLM_TEST_SLOWDB": json.dumps(slow)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while read_phase(phase_file) != phase:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, read_phase(phase_file)
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


@pytest.mark.parametrize(
    "case",
    [name for name in CASES],
)
def test_kill_between_the_two_commits(
    store_project: Path, env: dict[str, str], tmp_path: Path, case: str
) -> None:
    project = store_project
    setup, (killed_key, killed), expected, repairs = CASES[case]
    rows = StoreRows.of(project, env)
    user_db = Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    keys: dict[str, str] = {}
    for name in ("A", "B"):
        ran = smllm(["session", "new", "--json"], project, env)
        assert ran.code == 0, ran.err
        keys[name] = json.loads(ran.out)["session"]
    for name, args in setup:
        ran = smllm(["fire", "--session", keys[name], *args], project, env)
        assert ran.code == 0, ran.out + ran.err

    # the killed call: its session commit waits 30 s, and the kill comes while it waits
    phase_file = tmp_path / "phase"
    spec = {
        "project": str(project),
        "sessions": list(keys.values()),
        "ref": REF,
        "seed": 0,
        "log": str(tmp_path / "log.jsonl"),
        "limit_s": 60,
        "script": [[keys[killed_key], killed[0], as_params(killed)]],
    }
    slow = {"seed": 0, "max_ms": 0, "user_begin_ms": 30_000, "phase": str(phase_file)}
    before = Snapshot(rows, user_db).history_count if rows.exists() else 0
    kill_at_phase(spec, slow, env, phase_file, "wait-begin:user")

    store_sound(rows)
    integrity(user_db, cli=True)
    snap = Snapshot(rows, user_db)
    snap.check_instances()
    # the killed call's instance write and its history record are there; its session write
    # and audit are not
    assert snap.history_count == before + 1
    [inst_id] = snap.instances
    last = snap.history[inst_id][-1]
    assert (last["session"], last["event"]) == (keys[killed_key], killed[0])
    assert sum(snap.audit_events.values()) == before
    assert {n: snap.disagreements(keys[n]) for n in keys} == expected

    for name, args, code, text in repairs:
        ran = smllm(["fire", "--session", keys[name], *args], project, env)
        assert ran.err == "", ran.err
        assert ran.code == code, ran.out
        assert text.format(**keys) in ran.out, ran.out
    snap = Snapshot(rows, user_db)
    snap.check_instances()
    for name in keys:
        assert snap.disagreements(keys[name]) in ([], ["stale holding"]), name
    assert snap.disagreements(keys[repairs[-1][0]]) == []


#: where the kill lands → the schema version the store is left with. SQLite's first transaction
#: is the migration, so a kill at any of these leaves no table; PostgreSQL makes its schema in a
#: transaction of its own (begun implicitly: `in-tx`), then commits the first instance.
LEFT_AT = {
    "sqlite": {"wait-begin:instance": 0, "in-tx:instance": 0, "committing:instance": 0},
    "postgres": {"wait-begin:instance": 1, "in-tx:instance": 0, "committing:instance": 1},
}


@pytest.mark.parametrize("stall", ["wait-begin:instance", "in-tx:instance", "committing:instance"])
def test_kill_while_creating_the_store(
    store_project: Path,
    env: dict[str, str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    stall: str,
) -> None:
    """The first write of a project makes its store: a kill then leaves a store that opens."""
    project = store_project
    if backend == "postgres":
        # a database without smllm's schema, which the first write makes
        url = fresh_database(request.getfixturevalue("pg_server"))
        env["SMLLM_TEST_PG"] = url
        monkeypatch.setenv("SMLLM_TEST_PG", url)
    rows = StoreRows.of(project, env)
    user_db = Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    ran = smllm(["session", "new", "--json"], project, env)
    assert ran.code == 0, ran.err
    key = json.loads(ran.out)["session"]
    assert not rows.exists()
    phase_file = tmp_path / "phase"
    spec = {
        "project": str(project),
        "sessions": [key],
        "ref": REF,
        "seed": 0,
        "log": str(tmp_path / "log.jsonl"),
        "limit_s": 60,
        "script": [[key, "enter", as_params(ENTER)]],
    }
    slow = {"seed": 0, "max_ms": 0, "phase": str(phase_file), "stall": stall}
    kill_at_phase(spec, slow, env, phase_file, stall)

    # the store was being made: it opens, and holds no table yet (no table half made) or, on
    # PostgreSQL past its schema's own transaction, the whole schema and no instance
    if backend == "sqlite":
        assert rows.path is not None and rows.path.exists()
    store_sound(rows)
    assert rows.schema_version() == LEFT_AT[backend][stall]
    assert Snapshot(rows, user_db).instances == {}
    # a view, then the event again, through the real CLI
    ran = smllm(["session", "show", key], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out + ran.err
    assert f"session {key} · idle" in ran.out
    ran = smllm(["fire", "--session", key, *ENTER], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out + ran.err
    assert "Arrived by: enter (new issue)" in ran.out
    store_sound(rows)
    assert rows.schema_version() == 1
    snap = Snapshot(rows, user_db)
    snap.check_instances()
    assert snap.history_count == 1 and snap.disagreements(key) == []
