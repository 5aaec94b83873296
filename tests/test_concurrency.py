"""Concurrent writers on one store (engine.md §10): real OS processes race on one instance.

Each racer is a separate Python process (tests/helpers/racer.py) with its own session. They all
wait at a file barrier, then fire at once. Every test runs on both instance-store backends
(conftest's `store_project`): the SQLite file, and a namespace of a real PostgreSQL server.
Afterwards the stores are read directly (tests/helpers/storerows.py: the `sqlite3` module, with
`PRAGMA integrity_check` through the module and the `sqlite3` CLI; psycopg for PostgreSQL, with
the constraints checked by queries and the indexes by amcheck; the user store is SQLite on both)
and checked against what the racers were told:

- every accepted call (exit 0) wrote exactly one history record, and no refused call wrote one:
  no lost update, no phantom write;
- history versions are exactly 1..V and the instance's version is V;
- the history is a valid serial order: a `yield` is accepted only from the session that held the
  instance at the version it replaced, and a takeover names that session in its note;
- every loser got exit 1 with a message of engine.md §7.1 / §10 (`another session changed …`,
  `… moved to session …`, `another issue of dev already has ref …`), never exit 2 or stderr;
- two processes creating a new instance with one ref make exactly one instance (§10 Unique).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, enter_args, smllm
from helpers.storerows import StoreRows, fresh_database

RACER = ROOT / "helpers" / "racer.py"
#: how long the test waits for racers to reach a barrier, and for them to finish
READY_LIMIT = 60.0
FINISH_LIMIT = 120.0

Call = dict[str, Any]


# -- reading the stores ------------------------------------------------------------------------


def user_db(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"


def query(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def sound(project: Path, env: dict[str, str], request: pytest.FixtureRequest) -> None:
    """Both stores are whole: the instance store on its backend (amcheck on PostgreSQL's
    indexes), the user store's SQLite file through the module and the CLI."""
    rows = StoreRows.of(project, env)
    server = request.getfixturevalue("pg_server") if rows.backend == "postgres" else None
    assert rows.integrity(superuser=server) == "ok"
    assert StoreRows(user_db(env), None, "").integrity() == "ok"


def instance_rows(project: Path, env: dict[str, str], ref: str) -> list[dict[str, Any]]:
    """The instances of dev with REF, each row's columns checked against its document."""
    return StoreRows.of(project, env).instance_rows(machine="dev", ref=ref)


def history_of(project: Path, env: dict[str, str], instance_id: str) -> list[dict[str, Any]]:
    return StoreRows.of(project, env).history(instance_id)


def session_of(env: dict[str, str], key: str) -> dict[str, Any]:
    rows = query(user_db(env), "SELECT data FROM sessions WHERE key = ?", (key,))
    assert len(rows) == 1, key
    d: dict[str, Any] = json.loads(rows[0][0])
    return d


def audit_kinds(env: dict[str, str], key: str) -> Counter[str]:
    rows = query(user_db(env), "SELECT kind FROM audit WHERE session = ?", (key,))
    return Counter(r[0] for r in rows)


# -- running racers ----------------------------------------------------------------------------


def new_key(project: Path, env: dict[str, str]) -> str:
    ran = smllm(["session", "new", "--json"], project, env)
    assert ran.code == 0, ran.err
    key: str = json.loads(ran.out)["session"]
    return key


def wait_ready(folder: Path, names: list[str], procs: list[subprocess.Popen[str]]) -> None:
    end = time.monotonic() + READY_LIMIT
    while not all((folder / n).exists() for n in names):
        for p in procs:
            if p.poll() not in (None, 0):
                pytest.fail(
                    f"a racer died before the barrier: {p.stderr.read() if p.stderr else ''}"
                )
        assert time.monotonic() < end, "racers never reached the barrier"
        time.sleep(0.002)


def start(specs: list[dict[str, Any]], env: dict[str, str]) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, str(RACER), json.dumps(spec)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    ]


def finish(specs: list[dict[str, Any]], procs: list[subprocess.Popen[str]]) -> list[Call]:
    calls: list[Call] = []
    for spec, p in zip(specs, procs, strict=True):
        out, err = p.communicate(timeout=FINISH_LIMIT)
        assert p.returncode == 0, f"racer {spec['name']} failed: {out}{err}"
        calls.extend(json.loads(Path(spec["out"]).read_text()))
    return calls


def show(call: Call) -> str:
    return (
        f"{call['name']} {call['session']} {call['event']} → exit {call['code']} "
        f"({call['kind']})\n{call['out']}{call['err']}"
    )


def check_replies(calls: list[Call], allowed: set[str]) -> None:
    """Every call got a reply this test knows, exit 0 or 1, and nothing on stderr."""
    for c in calls:
        assert c["kind"] in allowed, show(c)
        assert c["code"] in (0, 1), show(c)
        assert c["err"] == "", show(c)
        assert "Traceback" not in c["out"], show(c)


def check_versions(inst: dict[str, Any], history: list[dict[str, Any]]) -> None:
    """History versions are exactly 1..V; the instance is at V and agrees with the last one."""
    assert [h["version"] for h in history] == list(range(1, len(history) + 1))
    assert inst["version"] == len(history) == history[-1]["version"]
    assert inst["state"] == history[-1]["to"]
    assert inst["status"] == history[-1]["status"]


def check_serial(history: list[dict[str, Any]]) -> None:
    """The history is a serial order of holders: each write came from the holder of the
    version it replaced, or took the instance over from that holder and says so."""
    for prev, rec in itertools.pairwise(history):
        if rec["event"] == "yield":
            assert rec["session"] == prev["session"], (prev, rec)
            assert rec["from"] == rec["to"] == prev["to"]
        else:
            assert rec["event"] == "enter", rec
            if rec["session"] != prev["session"]:
                note = f"Took over from session {prev['session']} (last active "
                assert rec["trace"] and rec["trace"][0].startswith(note), (prev, rec)
            else:
                assert not any(t.startswith("Took over") for t in rec["trace"]), (prev, rec)


# -- the race on one held instance -------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "racers", "rounds"),
    [("inproc", 6, 40), ("cli", 4, 6)],
    ids=["6-processes-in-process-cli", "4-processes-cli-subprocesses"],
)
def test_takeover_race(
    store_project: Path,
    env: dict[str, str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    mode: str,
    racers: int,
    rounds: int,
) -> None:
    project = store_project
    began = time.monotonic()
    ref = "GH-1"
    keys = [new_key(project, env) for _ in range(racers)]
    setup: list[Call] = []
    for i, key in enumerate(keys):
        # the first creates GH-1, each of the others takes it over from the one before
        ran = smllm(
            enter_args(key, ref),
            project,
            env,
        )
        assert ran.code == 0, ran.out + ran.err
        assert ("Arrived by: enter (new issue)" in ran.out) == (i == 0), ran.out
        assert ("Took over from session " + keys[i - 1] in ran.out) == (i > 0), ran.out
        setup.append({"session": key, "event": "enter", "code": 0})

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    specs = [
        {
            "project": str(project),
            "dir": str(barrier),
            "name": f"r{i}",
            "mode": mode,
            "plan": "hold",
            "session": key,
            "ref": ref,
            "rounds": rounds,
            "out": str(tmp_path / f"r{i}.json"),
        }
        for i, key in enumerate(keys)
    ]
    procs = start(specs, env)
    wait_ready(barrier, [f"ready-{s['name']}" for s in specs], procs)
    raced = time.monotonic()
    (barrier / "go").touch()
    calls = finish(specs, procs)
    race_s = time.monotonic() - raced

    assert len(calls) == racers * rounds
    check_replies(calls, {"yielded", "took-over", "continued", "lost", "moved"})
    for c in calls:
        if c["code"] == 0:
            assert c["kind"] in (
                ("yielded",) if c["event"] == "yield" else ("took-over", "continued")
            )

    # the stores are sound
    sound(project, env, request)

    [inst] = instance_rows(project, env, ref)
    history = history_of(project, env, inst["id"])
    check_versions(inst, history)
    check_serial(history)
    assert inst["status"] == "active" and inst["state"] == "PLAN"

    # no lost update and no phantom write: the accepted calls are exactly the history
    accepted = [c for c in setup + calls if c["code"] == 0]
    assert len(history) == len(accepted)
    assert Counter((h["session"], h["event"]) for h in history) == Counter(
        (c["session"], c["event"]) for c in accepted
    )

    # the holder is the last writer, and its session knows it holds the instance
    assert inst["holder"] == history[-1]["session"]
    holder = session_of(env, inst["holder"])
    assert holder["holding"] == {"machine": "dev", "id": inst["id"]}

    # sessions: one `event` audit per accepted call; one `moved` per refused yield (§7.1: the
    # session goes back to idle, written); a lost enter from idle writes nothing
    for key in keys:
        mine = [c for c in setup + calls if c["session"] == key]
        kinds = audit_kinds(env, key)
        assert kinds["event"] == sum(c["code"] == 0 for c in mine), key
        assert kinds["moved"] == sum(c["code"] == 1 and c["event"] == "yield" for c in mine), key
        s = session_of(env, key)
        if mine[-1]["code"] == 1:
            assert s["holding"] is None, key

    figures = Counter(c["kind"] for c in calls)
    print(
        f"\n[takeover race, {mode}] {racers} processes × {rounds} calls in {race_s:.2f} s "
        f"(test {time.monotonic() - began:.1f} s): history V={len(history)}, "
        f"accepted {sum(c['code'] == 0 for c in calls)} "
        f"(yielded {figures['yielded']}, took over {figures['took-over']}, "
        f"continued {figures['continued']}), refused {sum(c['code'] == 1 for c in calls)} "
        f"(lost the commit {figures['lost']}, moved {figures['moved']})"
    )
    # the racers really raced: takeovers moved other sessions to idle
    assert figures["moved"] + figures["lost"] > 0
    assert figures["took-over"] > 0


# -- the race to create one ref ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fresh", "racers", "keyless"),
    [(False, 4, (True, False, True, False)), (True, 5, (True,) * 5)],
    ids=["4-processes-existing-store", "5-keyless-processes-fresh-stores"],
)
def test_same_new_ref(
    store_project: Path,
    env: dict[str, str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    fresh: bool,
    racers: int,
    keyless: tuple[bool, ...],
) -> None:
    project = store_project
    began = time.monotonic()
    refs = [f"GH-{n}" for n in range(7, 13)]
    setup_keys: list[str] = []
    if not fresh:
        key = new_key(project, env)
        setup_keys.append(key)
        ran = smllm(
            enter_args(key, "GH-1"),
            project,
            env,
        )
        assert ran.code == 0, ran.out + ran.err
    else:
        # the race also creates both stores: on PostgreSQL, smllm's schema in a new database
        if backend == "postgres":
            url = fresh_database(request.getfixturevalue("pg_server"))
            env["SMLLM_TEST_PG"] = url
            monkeypatch.setenv("SMLLM_TEST_PG", url)
        assert not StoreRows.of(project, env).exists() and not user_db(env).exists()

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    specs = [
        {
            "project": str(project),
            "dir": str(barrier),
            "name": f"c{i}",
            "mode": "inproc",
            "plan": "create",
            "keyless": keyless[i],
            "refs": refs,
            "out": str(tmp_path / f"c{i}.json"),
        }
        for i in range(racers)
    ]
    procs = start(specs, env)
    for r in range(len(refs)):
        wait_ready(barrier, [f"ready-{r}-{s['name']}" for s in specs], procs)
        (barrier / f"go-{r}").touch()
    calls = finish(specs, procs)
    for c in calls:
        c["keyless"] = specs[int(c["name"][1:])]["keyless"]

    assert len(calls) == racers * len(refs)
    check_replies(calls, {"created", "took-over", "continued", "lost", "ref-taken"})
    sound(project, env, request)

    figures: Counter[str] = Counter()
    for ref in refs:
        mine = [c for c in calls if c["ref"] == ref]
        figures.update(c["kind"] for c in mine)
        # exactly one instance has the ref, made by exactly one accepted call
        rows = instance_rows(project, env, ref)
        assert len(rows) == 1, (ref, rows)
        [inst] = rows
        assert sum(c["kind"] == "created" for c in mine) == 1, [show(c) for c in mine]
        history = history_of(project, env, inst["id"])
        check_versions(inst, history)
        check_serial(history)
        assert history[0]["arrival"] == "enter (new issue)"
        accepted = [c for c in mine if c["code"] == 0]
        assert len(history) == len(accepted)
        assert Counter(h["session"] for h in history) == Counter(c["session"] for c in accepted)
        creator = next(c for c in mine if c["kind"] == "created")
        assert history[0]["session"] == creator["session"]
        assert inst["holder"] == history[-1]["session"]
    assert StoreRows.of(project, env).count() == len(refs) + (0 if fresh else 1)

    # a refused keyless enter saves nothing (engine.md §3): the sessions are exactly those made
    # beforehand and those of accepted keyless enters
    expected = set(setup_keys)
    expected |= {c["session"] for c in calls if not c["keyless"]}
    expected |= {c["session"] for c in calls if c["keyless"] and c["code"] == 0}
    assert None not in expected
    stored = {r[0] for r in query(user_db(env), "SELECT key FROM sessions")}
    assert stored == expected

    print(
        f"\n[same new ref, {'fresh' if fresh else 'existing'} stores] {racers} processes × "
        f"{len(refs)} refs (test {time.monotonic() - began:.1f} s): created {figures['created']}, "
        f"refused with the ref taken {figures['ref-taken']}, continued the winner's "
        f"{figures['took-over'] + figures['continued']}, lost a takeover {figures['lost']}"
    )


# -- two processes of one session --------------------------------------------------------------


def one_session_two_enters(
    project: Path, env: dict[str, str], tmp_path: Path
) -> tuple[str, list[Call]]:
    """One idle session; two processes enter two new issues from it at the same moment.

    Both instance commits succeed (different instances); the session commits are held back 1.5
    s (tests/helpers/slowdb.py, in the racers only), so both read the session as idle and
    the second session write finds `holding` changed: a session-write conflict (§10).
    """
    key = new_key(project, env)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    specs = [
        {
            "project": str(project),
            "dir": str(barrier),
            "name": f"s{i}",
            "mode": "inproc",
            "plan": "script",
            "session": key,
            "ref": ref,
            "script": [["enter", ["stateMachine=dev", f"issueId={ref}"]]],
            "out": str(tmp_path / f"s{i}.json"),
        }
        for i, ref in enumerate(["GH-2", "GH-3"])
    ]
    slow = {"seed": 0, "max_ms": 0, "user_begin_ms": 1500}
    procs = start(specs, {**env, "SMLLM_TEST_SLOWDB": json.dumps(slow)})
    wait_ready(barrier, [f"ready-{s['name']}" for s in specs], procs)
    (barrier / "go").touch()
    return key, finish(specs, procs)


def test_one_session_two_processes(
    store_project: Path, env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two processes fire `enter` on one session at once, their user-store transactions
    slowed: one call holds the session's call lock and is accepted; the other is refused up
    front (`… is busy …`, exit 1) and wrote nothing, so its ref has no instance."""
    project = store_project
    key, calls = one_session_two_enters(project, env, tmp_path)
    assert sorted(c["code"] for c in calls) == [0, 1], [show(c) for c in calls]
    [won] = [c for c in calls if c["code"] == 0]
    [lost] = [c for c in calls if c["code"] == 1]
    assert won["kind"] == "created" and won["err"] == ""
    assert lost["out"] == ""
    assert lost["err"] == (
        f"error: session {key} is busy with another call; wait for its reply, then fire again\n"
    )
    [winner] = instance_rows(project, env, won["ref"])
    assert instance_rows(project, env, lost["ref"]) == []
    assert session_of(env, key)["holding"] == {"machine": "dev", "id": winner["id"]}
    assert winner["holder"] == key
    assert audit_kinds(env, key)["event"] == 1
    sound(project, env, request)
