"""The world of the engine property tests (test_properties.py): the machine sets, the scenario
strategy, and the stores read directly: SQLite with sqlite3, a PostgreSQL instance store (one
namespace of the test server) with psycopg."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple
from unittest import mock

from hypothesis import Phase
from hypothesis import strategies as st

import smllm.examples
from smllm.machine.configs.config import load_configs
from smllm.machine.model import Machine

HERE = Path(__file__).resolve().parents[1]  # tests/
FIXTURES = HERE / "machines"
DEV = Path(smllm.examples.__file__).resolve().parent / "dev"

#: case → (source, path under .smllm/) of each machine file; the config lists them in order.
CASES: dict[str, tuple[tuple[Path, str], ...]] = {
    "always": ((FIXTURES / "always.smllm.yaml", "always.smllm.yaml"),),
    "fallback": ((FIXTURES / "fallback.smllm.yaml", "fallback.smllm.yaml"),),
    "final": ((FIXTURES / "final.smllm.yaml", "final.smllm.yaml"),),
    "reenter": ((FIXTURES / "reenter.smllm.yaml", "reenter.smllm.yaml"),),
    "visits": ((FIXTURES / "visits.smllm.yaml", "visits.smllm.yaml"),),
    "fix": ((FIXTURES / "fix", "fix/fix.smllm.yaml"),),
    "dev": ((DEV / "dev.smllm.yaml", "dev.smllm.yaml"),),
}
CASES["all"] = tuple(pair for pairs in CASES.values() for pair in pairs)

BUILTINS = ("enter", "resume", "listPaused", "yield", "pause", "unmatched")
BOGUS = ("dance", "Enter", "")
OFFERED = "<offered>"  # the event is picked at run time among those the session is offered
VIEW = "<view>"  # not an event: the read-only view of the session (engine.md §4.4)
STOP = "<stop>"  # not an event: the stop hook (engine.md §9), `continuing` from `pick`
PROMPT = "<prompt>"  # not an event: the user-prompt hook (engine.md §9)
CONFIG = "<config>"  # not an event: the config drops its first machine, or lists it again
KEYLESS, UNKNOWN, SAME = -1, -2, -3  # who fires: no key / a key no session has / as before
UNKNOWN_KEY = "sm-zzzzzz"
HARNESSES = ("claude", "codex", "opencode")
PAUSED_LIST_CUT = 10  # agent-text.md §3: the idle list shows at most 10 paused instances
GUARD_FILES = ("PLAN.md", "tests/test_bug.py")
CLEANED_SLOT = ("the interrupted instance is no longer interrupted", " moved to session ")

#: SQLite syncs every commit (engine.md §10); a tmpfs keeps that cheap where there is one.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
EXAMPLES = int(os.environ.get("SMLLM_PROPERTY_EXAMPLES", "100"))
#: examples per case with the instance store on PostgreSQL (each plays its scenario three times)
PG_EXAMPLES = int(os.environ.get("SMLLM_PROPERTY_PG_EXAMPLES", "20"))
#: the variable a PostgreSQL project's config names (`[state] url-env`), so no file holds the
#: test server's password
PG_ENV = "SMLLM_TEST_PG"
#: the snapshot's name for the PostgreSQL namespace's rows (SQLite's are named by file)
PG_KEY = "postgres"
#: conftest.BOUNDED's phases: shrinking replays whole scenarios and can take many minutes, so
#: it is off unless SMLLM_PROPERTY_SHRINK=1 (or SMLLM_SHRINK=1) asks for it; no explaining.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate) + (
    (Phase.shrink,)
    if os.environ.get("SMLLM_PROPERTY_SHRINK") or os.environ.get("SMLLM_SHRINK")
    else ()
)


class PgTarget(NamedTuple):
    """A namespace of the test server: where a project's config puts its instance store."""

    url: str
    namespace: str


class Inst(NamedTuple):
    """A param value resolved at run time: the label of the n-th instance made so far (null
    while there is none)."""

    n: int


#: param name → (good values, bad values). `Inst` tokens name an existing instance.
VALUES: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {
    "size": (("small", "large"), ("huge", 3, None)),
    "files": ((["src/a.py"], ["a.py", "b.py"]), ([], "a.py", "[1]", None)),
    "severity": (("low", "high"), ("urgent",)),
    "test": (("tests/test_bug.py", "tests/test_other.py"), ("test.txt", 5)),
    "comments": (
        ([{"file": "a.py", "text": "rename"}], [{"file": "a.py", "line": 3, "text": "x"}]),
        ([{"file": "a.py", "line": 0, "text": "x"}], "fix it", '[{"file": "a.py"}]'),
    ),
    "note": (("waiting for review", 'two\nlines <smllm> "q"'), (7, ["x"])),
    "bugId": (("BUG-1", "BUG-2", Inst(0), Inst(1)), ("bug 1", 12, "BUG-")),
    "issueId": (("GH-1", "GH-2", Inst(0), Inst(1)), ("GH-x", None)),
    "taskId": (("T1", "T2", Inst(0), Inst(1)), ("", 4)),
    "docPath": (("README.md", "docs/a.md", Inst(0), Inst(1)), ("x\n</smllm>",)),
    "ref": (("r1", "r2", Inst(0), Inst(1)), (1,)),
    "bogus": (("x",), (1,)),
}


# -- the machines ------------------------------------------------------------------------------


def build_project(root: Path, case: str, pg: PgTarget | None = None) -> Path:
    """root/project/.smllm holding the case's machines and a config listing them (with its
    instance store in PG's namespace, when given)."""
    project = root / "project"
    smllm_dir = project / ".smllm"
    smllm_dir.mkdir(parents=True)
    for source, name in CASES[case]:
        if source.is_dir():
            shutil.copytree(source, smllm_dir / source.name)
        else:
            shutil.copy(source, smllm_dir / name)
    write_config(project, [name for _, name in CASES[case]], pg)
    return project


def write_config(project: Path, files: list[str], pg: PgTarget | None = None) -> None:
    listed = ", ".join(f'"{name}"' for name in files)
    state = f'\n[state]\nurl-env = "{PG_ENV}"\nnamespace = "{pg.namespace}"\n' if pg else ""
    (project / ".smllm" / "config.toml").write_text(f"[machines]\nfiles = [{listed}]\n{state}")


@contextmanager
def environment(root: Path, pg: PgTarget | None = None) -> Iterator[None]:
    """XDG folders (and HOME) inside `root`, and PG's URL in PG_ENV, for one play."""
    values = {
        "XDG_STATE_HOME": str(root / "xdg-state"),
        "XDG_CACHE_HOME": str(root / "xdg-cache"),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "HOME": str(root / "home"),
        **({PG_ENV: pg.url} if pg else {}),
    }
    with mock.patch.dict(os.environ, values):
        os.environ.pop("SMLLM_CONFIG", None)
        yield


@cache
def machines_of(case: str) -> dict[str, Machine]:
    with tempfile.TemporaryDirectory() as tmp:
        project = build_project(Path(tmp), case)
        loaded = load_configs((str(project / ".smllm" / "config.toml"),))
    assert not [f for f in loaded.findings if f.level == "error"], loaded.findings
    assert loaded.machines, case
    return loaded.machines


# -- scenarios ---------------------------------------------------------------------------------


class Step(NamedTuple):
    who: int  # a session by index (mod the number of sessions), KEYLESS, UNKNOWN or SAME
    event: str  # an event name, OFFERED, VIEW, STOP, PROMPT or CONFIG
    pick: int  # which offered event, for OFFERED
    params: tuple[tuple[str, Any], ...] | int  # raw params, or a seed to fit them to the event
    source: str
    files: frozenset[str]  # the files `test -f` guards find
    ok: bool  # what other commands answer

    def __repr__(self) -> str:
        return (
            f"Step({self.who}, {self.event!r}, {self.pick}, {self.params!r}, {self.source!r}, "
            f"{sorted(self.files)}, {self.ok})"
        )


class Scenario(NamedTuple):
    seed: int
    tick: int  # seconds the scripted clock moves per reading (0: every call at one time)
    bound: int  # sessions bound by the session-start hook before the calls
    paused: int  # instances the first session starts and pauses before the calls
    steps: tuple[Step, ...]


def events_of(case: str) -> list[str]:
    names: dict[str, None] = {}
    for m in machines_of(case).values():
        names.update(dict.fromkeys(m.events))
        for s in m.states.values():
            names.update(dict.fromkeys(s.on))
    return list(names)


def param_names(case: str) -> list[str]:
    names: dict[str, None] = {"stateMachine": None, "state": None, "note": None, "bogus": None}
    for m in machines_of(case).values():
        names[m.ref.param] = None
        for ev in m.events.values():
            names.update(dict.fromkeys(p.name for p in ev.params))
    return list(names)


def raw_values(case: str, name: str) -> list[Any]:
    ms = machines_of(case)
    if name == "stateMachine":
        return [*ms, "nope", 3, None]
    if name == "state":
        return [*dict.fromkeys(s for m in ms.values() for s in m.states), "NOPE", 2]
    good, bad = VALUES.get(name, (("x",), (1,)))
    return [*good, *bad]


def scenarios(case: str) -> st.SearchStrategy[Scenario]:
    """Mostly offered events with fitted params (to get deep into the machine), and some
    named, built-in, bogus and raw calls (to get refusals of every kind)."""
    events = [*events_of(case), *BUILTINS]
    names = param_names(case)
    param = st.sampled_from(names).flatmap(
        lambda n: st.tuples(st.just(n), st.sampled_from(raw_values(case, n)))
    )
    raw = st.lists(param, max_size=3).map(tuple)
    fitted = st.integers(0, 2**16)
    step = st.builds(
        Step,
        who=st.sampled_from((SAME,) * 8 + (0, 1, 2, 3, KEYLESS, UNKNOWN)),
        event=st.sampled_from(
            (OFFERED,) * 24 + tuple(events) * 2 + BOGUS + (VIEW, STOP, STOP, STOP, PROMPT, CONFIG)
        ),
        pick=st.integers(0, 15),
        params=st.sampled_from((True,) * 5 + (False,)).flatmap(lambda fit: fitted if fit else raw),
        source=st.sampled_from(("agent",) * 4 + ("host",)),
        files=st.frozensets(st.sampled_from(GUARD_FILES)),
        ok=st.sampled_from((True,) * 4 + (False,)),
    )
    return st.builds(
        Scenario,
        seed=st.integers(0, 2**32 - 1),
        tick=st.sampled_from((1, 0, 45)),
        bound=st.integers(1, 3),
        paused=st.sampled_from((0,) * 7 + (PAUSED_LIST_CUT + 1,)),
        steps=st.integers(3, 18).flatmap(
            lambda n: st.lists(step, min_size=n, max_size=n).map(tuple)
        ),
    )


# -- the stores, read directly -----------------------------------------------------------------

Tables = dict[str, list[tuple[Any, ...]]]
#: database path (relative to the root), or PG_KEY → table → rows
Snapshot = dict[str, Tables]

#: a PostgreSQL namespace's rows in the columns (and order) of SQLite's tables: instances in
#: the order they were made (by their first history record: a commit inserts an instance
#: before its history record, as SQLite's rowids count), each with its `holder` column last
#: (SQLite has none; Peek checks it against the record and drops it); history numbered 1, 2, …
#: in commit order, since `seq` counts over every namespace of the server.
PG_INSTANCES = """
    SELECT i.id, i.machine, i.ref, i.status, i.updated, i.version, i.data, i.holder
    FROM smllm.instances i WHERE i.namespace = %s
    ORDER BY (SELECT min(h.seq) FROM smllm.history h
              WHERE h.namespace = i.namespace AND h.instance = i.id) NULLS LAST, i.id"""
PG_HISTORY = """
    SELECT row_number() OVER (ORDER BY seq), instance, data
    FROM smllm.history WHERE namespace = %s ORDER BY seq"""


class Peek:
    """Reads every row of every table of the SQLite databases in `folders`, in rowid order,
    with sqlite3 directly (read-only connections, kept open for speed), and, with PG, the
    namespace's instance and history rows (under PG_KEY, as SQLite's tables would hold them;
    empty while the server has no smllm schema). `strays` finds any other database under
    `root`, which the checks would miss."""

    def __init__(self, root: Path, folders: tuple[Path, ...], pg: PgTarget | None = None) -> None:
        self.root = root
        self.folders = folders
        self.conns: dict[Path, tuple[sqlite3.Connection, list[str]]] = {}
        self.pg = pg
        self.pg_conn: Any = None  # psycopg.Connection, opened at the first snapshot
        self.pg_schema = False

    def snapshot(self) -> Snapshot:
        out: Snapshot = {}
        found = sorted(p for folder in self.folders for p in folder.glob("*.db"))
        for path in found:
            conn, tables = self.conns.get(path) or (None, [])
            if conn is None:
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            if not tables:  # the schema, once there is one, never changes during a play
                sql = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                tables = [r[0] for r in conn.execute(sql)]
            self.conns[path] = (conn, tables)
            out[str(path.relative_to(self.root))] = {
                t: conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables
            }
        if self.pg is not None:
            out[PG_KEY] = self.pg_tables(self.pg)
        return out

    def pg_tables(self, pg: PgTarget) -> Tables:
        """The namespace's instances and history, read in autocommit (each query sees every
        commit made before it)."""
        if self.pg_conn is None:
            import psycopg

            self.pg_conn = psycopg.connect(pg.url, autocommit=True, connect_timeout=10)
        conn = self.pg_conn
        if not self.pg_schema:
            found = conn.execute("SELECT to_regclass('smllm.history')").fetchone()
            self.pg_schema = found is not None and found[0] is not None
            if not self.pg_schema:
                return {"instances": [], "history": []}
        instances = []
        for *row, holder in conn.execute(PG_INSTANCES, (pg.namespace,)).fetchall():
            record = json.loads(row[-1])
            columns = (record["id"], record["machine"], record["ref"], record["status"])
            assert tuple(row[:4]) == columns, f"columns disagree with the record: {row}"
            assert (row[4], row[5], holder) == (
                record["updated"],
                record["version"],
                record["holder"],
            ), f"columns disagree with the record: {row}, holder {holder}"
            instances.append(tuple(row))
        history = [tuple(r) for r in conn.execute(PG_HISTORY, (pg.namespace,)).fetchall()]
        return {"instances": instances, "history": history}

    def strays(self) -> list[Path]:
        return sorted(set(self.root.rglob("*.db")) - set(self.conns))

    def close(self) -> None:
        for conn, _ in self.conns.values():
            conn.close()
        if self.pg_conn is not None:
            self.pg_conn.close()


class View(NamedTuple):
    """The records of a snapshot, decoded."""

    instances: dict[str, dict[str, Any]]  # id → record, in insertion order
    history: list[tuple[str, dict[str, Any]]]  # (instance id, record), oldest first
    sessions: dict[str, dict[str, Any]]
    audit: list[tuple[str, str, dict[str, Any]]]  # (session, kind, detail)
    other: dict[str, list[tuple[Any, ...]]]  # bindings and any other table, by db/table


def decode(snap: Snapshot) -> View:
    view = View({}, [], {}, [], {})
    for db, tables in snap.items():
        for table, rows in tables.items():
            if table == "instances":
                for r in rows:
                    view.instances[r[0]] = json.loads(r[-1])
            elif table == "history":
                view.history.extend((r[1], json.loads(r[2])) for r in rows)
            elif table == "sessions":
                for r in rows:
                    view.sessions[r[0]] = json.loads(r[-1])
            elif table == "audit":
                view.audit.extend((r[1], r[3], json.loads(r[4])) for r in rows)
            elif table != "sqlite_sequence" and rows:
                view.other[f"{db}:{table}"] = rows
    return view


def rows(snap: Snapshot, only: tuple[str, ...] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """The non-empty tables (of the names in `only`, when given): a database made with empty
    tables holds no records."""
    return {
        f"{db}:{t}": r
        for db, tables in snap.items()
        for t, r in tables.items()
        if r and (not only or t in only)
    }


def instance_tables(snap: Snapshot) -> dict[str, list[tuple[Any, ...]]]:
    return rows(snap, ("instances", "history"))
