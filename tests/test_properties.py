"""Property tests of the engine's guarantees (engine.md §4.1, §7, §8, §9, §11, §12).

Hypothesis draws a scenario per fixture machine, the dev example, and all of them in one
config: a seed, a clock step, 1–3 sessions bound by the session-start hook (and sometimes 11
paused instances, so that `listPaused` is offered), then a sequence of steps. A step is a call
by a session, by no session or with an unknown key: an event (mostly one picked at run time
from those offered, else any machine, built-in or bogus event) with params fitted to it or
drawn raw, as the agent or the host, with what guard commands answer; or a view, a stop, a
user prompt, or the config dropping (restoring) its first machine. The scenario is played
through `App` with a `ScriptedHost` in a fresh temp folder, checking after every step, with
the stores read by sqlite3 directly:

- a refused call leaves the stores as they were but for the clean-ups of §4.1 (each checked to
  be due, with its exact message), ran no action command, and has an error and events list;
- an accepted call writes one history record per instance written, bumps its version by one,
  and writes only its session (blocks 0, yielded only by `yield`) and one `event` audit;
- reads (views, `listPaused`) write nothing and run nothing; stops and prompts follow §9;
- visits and versions never decrease; every instance's history versions are 1..version; no
  instance rests in a state with `always`; completed ⇔ final; a holder ⇔ active/interrupted;
- no call raises, except `CallError` for a call without a session or with an unknown key.

Then the same scenario is played again in another folder: replies (and the commands run, with
their environment) and the stores after every step must be identical byte for byte (§12), the
folder's path aside.

SMLLM_PROPERTY_EXAMPLES sets the examples per case (default 100); SMLLM_PROPERTY_SHRINK=1 turns
Hypothesis's shrinking on (off by default: it replays whole scenarios and can take minutes).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple
from unittest import mock

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from scripted_host import ScriptedHost

import smllm.examples
from smllm.api.app import App, CallError, Result
from smllm.engine.reply import Reply
from smllm.engine.view import Decision
from smllm.machine.config import load_configs
from smllm.machine.model import Command, Machine
from smllm.text.block import render

HERE = Path(__file__).resolve().parent
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
#: Shrinking replays whole scenarios and can take many minutes: off unless asked for.
PHASES = (
    tuple(Phase)
    if os.environ.get("SMLLM_PROPERTY_SHRINK")
    else tuple(p for p in Phase if p is not Phase.shrink)
)


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


def build_project(root: Path, case: str) -> Path:
    """root/project/.smllm holding the case's machines and a config listing them."""
    project = root / "project"
    smllm_dir = project / ".smllm"
    smllm_dir.mkdir(parents=True)
    for source, name in CASES[case]:
        if source.is_dir():
            shutil.copytree(source, smllm_dir / source.name)
        else:
            shutil.copy(source, smllm_dir / name)
    write_config(project, [name for _, name in CASES[case]])
    return project


def write_config(project: Path, files: list[str]) -> None:
    listed = ", ".join(f'"{name}"' for name in files)
    (project / ".smllm" / "config.toml").write_text(f"[machines]\nfiles = [{listed}]\n")


@contextmanager
def environment(root: Path) -> Iterator[None]:
    """XDG folders (and HOME) inside `root`, for the duration of one play."""
    values = {
        "XDG_STATE_HOME": str(root / "xdg-state"),
        "XDG_CACHE_HOME": str(root / "xdg-cache"),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "HOME": str(root / "home"),
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
Snapshot = dict[str, Tables]  # database path (relative to the root) → table → rows


class Peek:
    """Reads every row of every table of the SQLite databases in `folders`, in rowid order,
    with sqlite3 directly (read-only connections, kept open for speed). `strays` finds any
    other database under `root`, which the checks would miss."""

    def __init__(self, root: Path, folders: tuple[Path, ...]) -> None:
        self.root = root
        self.folders = folders
        self.conns: dict[Path, tuple[sqlite3.Connection, list[str]]] = {}

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
        return out

    def strays(self) -> list[Path]:
        return sorted(set(self.root.rglob("*.db")) - set(self.conns))

    def close(self) -> None:
        for conn, _ in self.conns.values():
            conn.close()


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


# -- playing a scenario ------------------------------------------------------------------------


class Played(NamedTuple):
    replies: list[str]  # one line per call: how it ended and its text (or error)
    snapshots: list[str]  # the stores after each call, as JSON


class Player:
    def __init__(self, root: Path, case: str, scenario: Scenario, check: bool) -> None:
        self.root = root
        self.case = case
        self.scenario = scenario
        self.check = check
        self.machines = machines_of(case)
        self.project = build_project(root, case)
        self.host = ScriptedHost(scenario.seed, step=timedelta(seconds=scenario.tick))
        self.app = App(cwd=str(self.project), host=self.host)
        self.keys: list[str] = []
        self.who = 0  # the session index of the latest call, for SAME
        self.replies: list[str] = []
        self.snapshots: list[str] = []
        # the user store (engine.md §10) and the config's default `[state] dir`
        self.peek = Peek(root, (root / "xdg-state" / "smllm", self.project / ".smllm" / "state"))
        self.last = self.peek.snapshot()
        self.previous = self.last
        self._view_last: View | None = None
        self._view_previous: View | None = None
        self.seen: dict[str, tuple[int, dict[str, int]]] = {}  # id → (version, visits)
        self.configured = set(self.machines)  # the machines the config lists now
        self.guard_commands = {
            t.guard.command
            for m in self.machines.values()
            for state in m.states.values()
            for t in (*(t for ts in state.on.values() for t in ts), *state.always)
            if t.guard is not None and t.guard.command is not None
        }

    def normal(self, text: str) -> str:
        return text.replace(str(self.root), "<ROOT>")

    def record(self, what: str) -> None:
        self.replies.append(self.normal(what))
        snap = self.peek.snapshot()
        self.snapshots.append(self.normal(json.dumps(snap, sort_keys=True, ensure_ascii=False)))
        self.previous, self.last = self.last, snap
        self._view_previous, self._view_last = self._view_last, None

    @property
    def view_last(self) -> View:
        """The records after the latest step (decoded when first needed)."""
        if self._view_last is None:
            self._view_last = decode(self.last)
        return self._view_last

    @property
    def view_previous(self) -> View:
        """The records before the latest step."""
        if self._view_previous is None:
            self._view_previous = decode(self.previous)
        return self._view_previous

    # -- resolving a step ----------------------------------------------------------------------

    def labels(self) -> list[str]:
        out: list[str] = []
        for rec in self.view_last.instances.values():
            out.append(rec["ref"] if rec["ref"] is not None else rec["id"])
        return out

    def value(self, v: Any) -> Any:
        if isinstance(v, Inst):
            labels = self.labels()
            return labels[v.n % len(labels)] if labels else None
        return v

    def held_state(self, key: str | None) -> tuple[Machine, str] | None:
        """The machine and state the session holds, if it still holds its instance."""
        if key is None:
            return None
        v = self.view_last
        s = v.sessions.get(key)
        if s is None or s["holding"] is None:
            return None
        rec = v.instances.get(s["holding"]["id"])
        if rec is None or rec["holder"] != key or rec["status"] != "active":
            return None
        m = self.machines.get(rec["machine"])
        if m is None or rec["state"] not in m.states:
            return None
        return m, rec["state"]

    def offered(self, key: str | None, source: str) -> list[str]:
        if key is None or key == UNKNOWN_KEY:
            return ["enter"]
        result = self.app.view(key)
        names = [item.name for item in result.reply.events.items] if result.reply.events else []
        held = self.held_state(key)
        if source == "host" and held is not None:
            machine, state = held
            names = [*machine.states[state].on, *[n for n in names if n not in machine.events]]
        return names or ["enter"]

    def fit(self, seed: int, key: str | None, event: str) -> tuple[tuple[str, Any], ...]:
        """Params that mostly pass the event's checks, drawn from `seed`."""
        rng = random.Random(seed)

        def pick(name: str) -> Any:
            good, bad = VALUES.get(name, (("x",), (1,)))
            return self.value(rng.choice(good if rng.random() < 0.85 or not bad else bad))

        if event == "enter":
            ids = list(self.machines)
            machine = self.machines[rng.choice(ids)]
            out: list[tuple[str, Any]] = [
                ("stateMachine", machine.id if rng.random() < 0.95 else "nope")
            ]
            if rng.random() < 0.6:
                out.append((machine.ref.param, pick(machine.ref.param)))
            if rng.random() < 0.3:
                states = [*machine.entry_points(), *machine.states]
                out.append(("state", rng.choice(states)))
            return tuple(out)
        if event == "yield":
            return (("note", pick("note")),) if rng.random() < 0.4 else ()
        held = self.held_state(key)
        if held is None:
            return ()
        machine, state = held
        specs = machine.states[state].params.get(event, ())
        return tuple(
            (spec.name, pick(spec.name))
            for spec in specs
            if rng.random() < (0.95 if spec.required else 0.5)
        )

    # -- the play ------------------------------------------------------------------------------

    def play(self) -> Played:
        for i in range(self.scenario.bound):
            bound = self.app.bind(HARNESSES[i], f"host-session-{i}", str(self.project))
            assert bound is not None and bound.session is not None
            self.keys.append(bound.session.key)
            self.record(f"bind {bound.session.key}\n{bound.text()}")
            if self.check:
                self.check_bind(bound.session.key)
        first = next(iter(self.machines))
        for _ in range(self.scenario.paused):
            self.step(Step(0, "enter", 0, (("stateMachine", first),), "agent", frozenset(), True))
            self.step(Step(SAME, "pause", 0, (), "agent", frozenset(), True))
        for step in self.scenario.steps:
            self.step(step)
        assert not self.peek.strays(), f"stores the checks did not read: {self.peek.strays()}"
        return Played(self.replies, self.snapshots)

    def step(self, step: Step) -> None:
        if step.who == KEYLESS:
            key: str | None = None
        elif step.who == UNKNOWN:
            key = UNKNOWN_KEY
        else:
            if step.who != SAME:
                self.who = step.who % len(self.keys)
            key = self.keys[self.who]
        event = step.event
        if event == CONFIG:
            self.toggle_config()
            return
        if event in (STOP, PROMPT):
            self.hook(step, key or UNKNOWN_KEY, event)
            return
        if event == OFFERED:
            names = self.offered(key, step.source)
            event = names[step.pick % len(names)]
        if isinstance(step.params, int):
            params = self.fit(step.params, key, event)
        else:
            params = tuple((n, self.value(v)) for n, v in step.params)
        self.host.files = set(step.files)
        self.host.ok = step.ok
        call = f"{key} {event} {params!r} {step.source}"
        n = len(self.host.calls)
        try:
            if event == VIEW:
                result: Result = self.app.view(key)
            else:
                result = self.app.fire(key, event, params, step.source)
        except CallError as exc:
            self.record(f"{call}\nCallError: {exc}")
            if self.check:
                assert not self.host.calls[n:], f"{call}: a CallError ran a command"
                assert key is None or key == UNKNOWN_KEY, (call, exc)
                assert key == UNKNOWN_KEY or event != "enter", (call, exc)
                assert rows(self.previous) == rows(self.last), f"{call}: a CallError wrote"
                self.check_always(call)
            return
        text = result.text()
        ran = self.host.calls[n:]
        shown = "".join(
            f"\nran {c.command.shown()} in {c.cwd} with {sorted(c.env.items())}" for c in ran
        )
        self.record(f"{call}\n{'ok' if result.ok else 'refused'}{shown}\n{text}")
        if self.check:
            if event == VIEW or (event == "listPaused" and result.ok):
                assert not ran, f"{call}: a read ran a command"
            elif not result.ok:
                # engine.md §4.1: every check that can refuse comes before the first action
                actions = [c.command for c in ran if c.command not in self.guard_commands]
                assert not actions, f"{call}: refused after running actions {actions}"
            assert key is not None or event == "enter", call
            assert key != UNKNOWN_KEY, call
            left = self.left(self.view_previous, key)
            if event == VIEW or (event == "listPaused" and result.ok):
                assert rows(self.previous) == rows(self.last), f"{call}: a read wrote\n{text}"
                if left is not None:
                    said = (*result.reply.notes, result.reply.error)
                    assert left in said, f"{call}: without the §7.1 message {left!r}\n{text}"
            elif left is None and (unconf := self.unconfigured(self.view_previous, key)):
                if event == "pause" and not params:
                    assert result.ok, f"{call}: §7.2 lets pause go\n{text}"
                    self.check_accepted(call, key, event, result)
                else:
                    assert not result.ok and result.reply.error == unconf, (call, text)
                    self.check_refused(call, key, result, left)
            elif result.ok:
                assert left is None, f"{call}: accepted, but the instance had left: {left}"
                self.check_accepted(call, key, event, result)
            else:
                self.check_refused(call, key, result, left)
            self.check_always(call)
        if key is None and result.ok and result.session is not None:
            self.keys.append(result.session.key)
            self.who = len(self.keys) - 1

    def toggle_config(self) -> None:
        """engine.md §7.2: the first machine leaves the config (or comes back)."""
        files = [name for _, name in CASES[self.case]]
        first = next(iter(self.machines))
        if first in self.configured:
            self.configured.discard(first)
            files = files[1:]
        else:
            self.configured.add(first)
        write_config(self.project, files)
        self.record(f"{CONFIG} {sorted(self.configured)}")
        if self.check:
            assert rows(self.previous) == rows(self.last)

    def hook(self, step: Step, key: str, event: str) -> None:
        """The stop hook or the user-prompt hook of the session (engine.md §9)."""
        continuing = (None, True, False)[step.pick % 3]
        call = f"{key} {event} continuing={continuing}"
        try:
            n = len(self.host.calls)
            if event == STOP:
                out = self.app.stop(key, continuing)
                what = f"{out.decision}\n{render(out.reply) if out.reply else ''}"
            else:
                self.app.prompt_submitted(key)
                what = "prompted"
        except CallError as exc:
            self.record(f"{call}\nCallError: {exc}")
            if self.check:
                assert key == UNKNOWN_KEY, (call, exc)
                assert rows(self.previous) == rows(self.last), f"{call}: a CallError wrote"
            return
        self.record(f"{call}\n{what}")
        if self.check:
            assert not self.host.calls[n:], f"{call}: a hook ran a command"
            assert key != UNKNOWN_KEY, call
            if event == STOP:
                self.check_stop(call, key, continuing, out.decision, out.reply)
            else:
                self.check_prompt(call, key)
            self.check_always(call)

    # -- the checks ----------------------------------------------------------------------------

    def kind_label(self, inst: dict[str, Any]) -> tuple[str, str]:
        """KIND and LABEL as messages name an instance; KIND is `instance` while its machine
        is not configured (engine.md §7.2: its `meta.instance.kind` is not loaded)."""
        label = inst["ref"] if inst["ref"] is not None else inst["id"]
        machine = inst["machine"]
        return (self.machines[machine].kind if machine in self.configured else "instance"), label

    def left(self, v: View, key: str | None) -> str | None:
        """engine.md §7.1: the message a call of the session must get because its instance has
        left it, or None when it has not (or the session holds nothing)."""
        s = v.sessions.get(key) if key is not None else None
        if s is None or s["holding"] is None:
            return None
        inst = v.instances.get(s["holding"]["id"])
        if inst is None:
            return f"instance {s['holding']['id']} no longer exists; you are in idle"
        kind, label = self.kind_label(inst)
        if inst["holder"] is not None and inst["holder"] != key:
            return f"{kind} {label} moved to session {inst['holder']}; you are in idle"
        if inst["status"] != "active":
            return f"{kind} {label} is {inst['status']}; you are in idle"
        return None

    def unconfigured(self, v: View, key: str | None) -> str | None:
        """engine.md §7.2: the refusal of every event but `pause` while the session holds an
        instance of a machine the config no longer lists, or None."""
        s = v.sessions.get(key) if key is not None else None
        if s is None or s["holding"] is None or s["holding"]["machine"] in self.configured:
            return None
        return (
            f"state machine {s['holding']['machine']} is not configured (its file might have "
            "errors); fix the config, then resume"
        )

    def stale_slot(self, v: View, key: str) -> str | None:
        """engine.md §5.2: the message of a `resume` from idle whose slot is stale, or None."""
        slot = v.sessions[key]["interrupted"]
        if slot is None:
            return None
        inst = v.instances.get(slot["id"])
        if inst is None:
            return "the interrupted instance is no longer interrupted"
        if inst["holder"] is not None and inst["holder"] != key:
            return f"{self.kind_label(inst)[1]} moved to session {inst['holder']}"
        if inst["status"] != "interrupted":
            return "the interrupted instance is no longer interrupted"
        return None

    def session_change(self, call: str, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The session's record before and after a hook, checking that nothing else changed
        but the session's audit records (returned ones are checked by the caller)."""
        assert instance_tables(self.previous) == instance_tables(self.last), (
            f"{call}: a hook wrote an instance"
        )
        before, after = self.view_previous, self.view_last
        assert before.other == after.other, f"{call}: a binding changed"
        for k in set(before.sessions) | set(after.sessions):
            if k != key:
                assert before.sessions.get(k) == after.sessions.get(k), f"{call}: {k} changed"
        assert after.audit[: len(before.audit)] == before.audit
        return before.sessions[key], after.sessions[key]

    def audit_added(self) -> list[tuple[str, str]]:
        n = len(self.view_previous.audit)
        return [(s, kind) for s, kind, _ in self.view_last.audit[n:]]

    def check_stop(
        self,
        call: str,
        key: str,
        continuing: bool | None,
        decision: str,
        reply: Reply | None,
    ) -> None:
        """engine.md §9, rules 2 – 7."""
        old, new = self.session_change(call, key)
        left = self.left(self.view_previous, key)
        added = self.audit_added()
        unconfigured = left is None and self.unconfigured(self.view_previous, key) is not None
        if old["holding"] is None or (left is None and (unconfigured or old["yielded"])):
            assert decision is Decision.ALLOW, (call, decision)
            assert rows(self.previous) == rows(self.last), f"{call}: an allowed stop wrote"
        elif left is not None:
            assert decision is Decision.BLOCK, (call, decision)
            assert reply is not None and left in (*reply.notes, reply.error), (call, reply)
            self.check_written(call, old, new, holding=None)
            assert added == [(key, "moved")], (call, added)
        elif old["blocks"] >= 1 and (continuing is not False or old["blocks"] >= 2):
            assert decision is Decision.RUNAWAY, (call, decision, old)
            assert added == [(key, "runaway")], (call, added)
            assert new == old, f"{call}: a runaway stop wrote the session"
        else:
            assert decision is Decision.BLOCK, (call, decision, old)
            assert reply is not None and reply.events is not None, call
            assert not reply.instructions, f"{call}: a blocked stop has no instructions"
            self.check_written(call, old, new, blocks=old["blocks"] + 1)
            assert added == [(key, "block")], (call, added)

    def check_prompt(self, call: str, key: str) -> None:
        """engine.md §9: a user prompt clears `yielded` and `blocks`, writing only then."""
        old, new = self.session_change(call, key)
        if not old["yielded"] and old["blocks"] == 0:
            assert rows(self.previous) == rows(self.last), f"{call}: a prompt wrote"
            return
        self.check_written(call, old, new, yielded=False, blocks=0)
        assert self.audit_added() == [(key, "prompt")]

    def check_written(
        self, call: str, old: dict[str, Any], new: dict[str, Any], **changes: Any
    ) -> None:
        """The session was written with `changes` and nothing else: its version moves by one
        and its lastActive moves (engine.md §3; with a stopped clock it stays)."""
        expected = {
            **old,
            **changes,
            "version": old["version"] + 1,
            "lastActive": new["lastActive"],
        }
        assert new == expected, f"{call}: the session changed otherwise: {old} → {new}"
        if self.scenario.tick:
            assert new["lastActive"] > old["lastActive"], f"{call}: lastActive stayed"

    def check_bind(self, key: str) -> None:
        before, after = self.view_previous, self.view_last
        assert instance_tables(self.previous) == instance_tables(self.last)
        assert key in after.sessions and key not in before.sessions
        assert after.audit[len(before.audit) :] == [(key, "bind", after.audit[-1][2])]

    def check_refused(self, call: str, key: str | None, result: Result, left: str | None) -> None:
        """engine.md §4.1: a refused call changes nothing but the documented clean-ups."""
        text = result.text()
        error = result.reply.error
        where = f"{call}: refused, but"
        assert error is not None and "<events>" in text, f"{where} no error or events\n{text}"
        assert instance_tables(self.previous) == instance_tables(self.last), (
            f"{where} an instance or history record changed\n{text}"
        )
        before, after = self.view_previous, self.view_last
        assert before.other == after.other, f"{where} a binding changed\n{text}"
        if key is None:
            assert text.startswith("<smllm>\nno session · idle\n"), f"{where} a session\n{text}"
            assert rows(self.previous) == rows(self.last), f"{where} the store changed\n{text}"
            return
        moved = left is not None
        stale = None if moved else self.stale_slot(before, key)
        cleaned = stale is not None and error == stale
        if moved:
            assert error == left, f"{where} not with the §7.1 message {left!r}\n{text}"
        else:
            assert not error.endswith("; you are in idle"), f"{where} the instance is here\n{text}"
            assert cleaned or not any(m in error for m in CLEANED_SLOT), (
                f"{where} the slot was not stale\n{text}"
            )
        if not (moved or cleaned):
            assert rows(self.previous) == rows(self.last), f"{where} the store changed\n{text}"
            return
        for k in set(before.sessions) | set(after.sessions):
            if k != key:
                assert before.sessions.get(k) == after.sessions.get(k), f"{where} {k} changed"
        old, new = before.sessions[key], after.sessions[key]
        assert before.audit == after.audit[: len(before.audit)]
        added = after.audit[len(before.audit) :]
        if moved:
            # §7.1: back to idle, written, with a `moved` audit record
            self.check_written(where, old, new, holding=None)
            assert [(s, kind) for s, kind, _ in added] == [(key, "moved")], added
        else:
            # §5.2: the stale slot emptied, nothing else
            self.check_written(where, old, new, interrupted=None)
            assert not added, f"{where} an audit record was written"

    def check_accepted(self, call: str, key: str | None, event: str, result: Result) -> None:
        """engine.md §4.2, §11: an accepted event writes its instance(s), one history record
        each, the session and one audit record."""
        text = result.text()
        assert "\nerror: " not in text, f"{call}: accepted with an error\n{text}"
        reply = result.reply
        if reply.header.machine is not None and reply.completed is None:
            # agent-text.md §7: an entry block or `Yielded`, without an events list
            assert "<events>" not in text, f"{call}: an events list after a move\n{text}"
        before, after = self.view_previous, self.view_last
        assert before.other == after.other, f"{call}: a binding changed"
        assert list(before.instances) == list(after.instances)[: len(before.instances)]
        written = {i for i, rec in after.instances.items() if before.instances.get(i) != rec}
        assert written, f"{call}: accepted, but no instance was written"
        assert after.history[: len(before.history)] == before.history
        added = after.history[len(before.history) :]
        assert sorted(i for i, _ in added) == sorted(written), (
            f"{call}: history records {[i for i, _ in added]} for instances {sorted(written)}"
        )
        for i, rec in added:
            inst = after.instances[i]
            assert rec["version"] == inst["version"], (call, rec, inst)
            assert rec["to"] == inst["state"] and rec["status"] == inst["status"], (call, rec)
            old = before.instances.get(i)
            assert inst["version"] == (old["version"] + 1 if old else 1), (call, old, inst)
        session = result.session
        assert session is not None
        mine = after.sessions[session.key]
        assert mine["blocks"] == 0 and mine["yielded"] == (event == "yield"), (call, mine)
        for i in written:  # §2: whatever this call made active or interrupted, it holds
            inst = after.instances[i]
            if inst["status"] in ("active", "interrupted"):
                assert inst["holder"] == session.key, (call, inst)
        held = mine["holding"]
        assert held is None or after.instances[held["id"]]["status"] == "active", (call, mine)
        assert held is None or held["id"] in written, (call, mine)
        if key is not None and self.scenario.tick:
            old_last = before.sessions[key]["lastActive"]
            assert mine["lastActive"] > old_last, f"{call}: lastActive stayed"
        for k in set(before.sessions) | set(after.sessions):
            if k != session.key:
                assert before.sessions.get(k) == after.sessions.get(k), f"{call}: {k} changed"
        assert after.audit[: len(before.audit)] == before.audit
        kinds = [(s, kind) for s, kind, _ in after.audit[len(before.audit) :]]
        expected = [(session.key, "event")]
        if key is None:
            expected.insert(0, (session.key, "bind"))
        assert kinds == expected, (call, kinds)

    def check_always(self, call: str) -> None:
        """After every call: visits and versions never decrease (§8, §12), no instance rests in
        a state with `always` (§12), and history agrees with the instance (§11)."""
        v = self.view_last
        by_instance: dict[str, list[dict[str, Any]]] = {}
        for i, rec in v.history:
            by_instance.setdefault(i, []).append(rec)
        for i, inst in v.instances.items():
            machine = self.machines[inst["machine"]]
            state = machine.states[inst["state"]]
            assert not state.always, f"{call}: {i} rests in {state.name}, which has always"
            assert (inst["status"] == "completed") == state.final, (call, inst)
            assert (inst["holder"] is not None) == (inst["status"] in ("active", "interrupted"))
            records = by_instance.get(i, [])
            assert records and records[-1]["version"] == inst["version"], (call, inst, records)
            assert [r["version"] for r in records] == list(range(1, inst["version"] + 1))
            visits: dict[str, int] = inst["visits"]
            if i in self.seen:
                version, old_visits = self.seen[i]
                assert inst["version"] >= version, f"{call}: version of {i} went down"
                for name, count in old_visits.items():
                    assert visits.get(name, 0) >= count, f"{call}: visits of {i} at {name} fell"
            self.seen[i] = (inst["version"], dict(visits))
        assert set(self.seen) <= set(v.instances), f"{call}: an instance was deleted"


def play(base: Path, case: str, scenario: Scenario, check: bool) -> Played:
    base.mkdir()
    with environment(base):
        player = Player(base, case, scenario, check)
        try:
            return player.play()
        finally:
            player.peek.close()


@pytest.mark.parametrize("case", list(CASES))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_engine_properties(case: str, data: st.DataObject) -> None:
    scenario = data.draw(scenarios(case), label="scenario")
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        first = play(Path(tmp) / "one", case, scenario, check=True)
        again = play(Path(tmp) / "two", case, scenario, check=False)
    for i, (a, b) in enumerate(zip(first.replies, again.replies, strict=True)):
        assert a == b, f"call {i}: replies differ"
    for i, (a, b) in enumerate(zip(first.snapshots, again.snapshots, strict=True)):
        assert a == b, f"call {i}: stores differ"


# -- single examples ---------------------------------------------------------------------------


@contextmanager
def small_world(case: str) -> Iterator[App]:
    """An App over the case's machines in a fresh temp folder, with a ScriptedHost."""
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp)
        project = build_project(root, case)
        with environment(root):
            yield App(cwd=str(project), host=ScriptedHost(1))


def bound(app: App, name: str) -> str:
    result = app.bind("claude", name, app.cwd)
    assert result is not None and result.session is not None
    return result.session.key


def test_scripted_host_is_deterministic() -> None:
    a, b = ScriptedHost(5), ScriptedHost(5)
    assert [a.new_id("i-") for _ in range(3)] == [b.new_id("i-") for _ in range(3)]
    assert a.now().isoformat() == "2026-01-01T00:00:00+00:00"
    assert (a.now() - a.now()).total_seconds() == -1
    plan = Command("test -f PLAN.md", 60.0, "60", None)
    assert not a.run_command(plan, "/", {}).ok
    a.files.add("PLAN.md")
    assert a.run_command(plan, "/", {}).ok
    absent = Command('! test -f "$SMLLM_PARAM_TEST"', 60.0, "60", None)
    assert a.run_command(absent, "/", {"SMLLM_PARAM_TEST": "t.py"}).ok
    assert [c.command for c in a.calls] == [plan, plan, absent]


def test_left_instance_without_holder_is_named_by_status() -> None:
    """engine.md §7.1: a held instance that another session took over and paused has no
    holder; the first session's next call reads `doc README.md is paused; you are in idle`.
    (smllm said `moved to session None` until 8d8dfda; kept as a regression test.)"""
    with small_world("final") as app:
        a, b = bound(app, "a"), bound(app, "b")
        doc = (("stateMachine", "final"), ("docPath", "README.md"))
        assert app.fire(a, "enter", doc).ok
        assert app.fire(b, "enter", doc).ok
        assert app.fire(b, "pause").ok
        result = app.fire(a, "yield")
        assert not result.ok
        assert result.reply.error == "doc README.md is paused; you are in idle"


def test_runaway_stop_writes_only_its_audit() -> None:
    """engine.md §9 rule 6: a runaway stop writes the audit record `runaway` and nothing else.
    (App.stop also bumped the session's version until 7704c02; kept as a regression test.)"""
    with small_world("final") as app:
        a = bound(app, "a")
        assert app.fire(a, "enter", (("stateMachine", "final"),)).ok
        assert app.stop(a, False).decision is Decision.BLOCK
        before = app.user.session(a)
        assert app.stop(a, True).decision is Decision.RUNAWAY
        assert [r.kind for r in app.user.audit(a)][-1] == "runaway"
        assert app.user.session(a) == before


def _block(app: App, a: str) -> Callable[[], object]:
    return lambda: app.stop(a, False)  # blocks 0 → 1


def _prompt(app: App, a: str) -> Callable[[], object]:
    assert app.stop(a, False).decision is Decision.BLOCK
    return lambda: app.prompt_submitted(a)  # blocks 1 → 0


def _stale_slot(app: App, a: str) -> Callable[[], object]:
    assert app.fire(a, "unmatched").ok  # `final` has no fallback: interrupted, in a's slot
    slot = app.user.session(a)
    assert slot is not None and slot.interrupted is not None
    b = bound(app, "b")
    assert app.fire(b, "enter", (("stateMachine", "final"), ("docPath", slot.interrupted.id))).ok
    return lambda: app.fire(a, "resume")  # refused: `… moved to session …`, the slot emptied


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(_block, id="blocked-stop"),
        pytest.param(_prompt, id="prompt"),
        pytest.param(_stale_slot, id="stale-slot"),
    ],
)
def test_session_writes_move_last_active(
    write: Callable[[App, str], Callable[[], object]],
) -> None:
    """engine.md §3: a session's lastActive moves on every write, these three included.
    (They left it until 7704c02; kept as a regression test.)"""
    with small_world("final") as app:
        a = bound(app, "a")
        assert app.fire(a, "enter", (("stateMachine", "final"),)).ok
        call = write(app, a)
        before = app.user.session(a)
        call()
        after = app.user.session(a)
        assert before is not None and after is not None
        assert after.version > before.version  # the session was written
        assert after.last_active > before.last_active
