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

The same runs with the instance store on the test PostgreSQL server (issue 11 §2), a fresh
namespace per play, its rows read with psycopg after every step as SQLite's tables would hold
them (history numbered in commit order: `seq` counts over the whole server). The replay uses a
second namespace; a third play, on SQLite, must give the same replies and the same records.

SMLLM_PROPERTY_EXAMPLES sets the examples per case (default 100), SMLLM_PROPERTY_PG_EXAMPLES
those on PostgreSQL (default 20); SMLLM_PROPERTY_SHRINK=1 turns Hypothesis's shrinking on (off
by default: it replays whole scenarios and can take minutes).
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers.property_player import Played, play
from helpers.property_settings import PG_PROPERTY_SETTINGS, PROPERTY_SETTINGS
from helpers.property_world import (
    CASES,
    PG_KEY,
    SCRATCH,
    PgTarget,
    build_project,
    environment,
    scenarios,
)
from helpers.scripted_host import ScriptedHost
from hypothesis import given
from hypothesis import strategies as st

from smllm.api.app import App
from smllm.engine.stop import Decision
from smllm.machine.model import Command


@pytest.mark.parametrize("case", list(CASES))
@PROPERTY_SETTINGS
@given(data=st.data())
def test_engine_properties(case: str, data: st.DataObject) -> None:
    scenario = data.draw(scenarios(case), label="scenario")
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        first = play(Path(tmp) / "one", case, scenario, check=True)
        again = play(Path(tmp) / "two", case, scenario, check=False)
    same_play(first, again)


def same_play(first: Played, again: Played) -> None:
    for i, (a, b) in enumerate(zip(first.replies, again.replies, strict=True)):
        assert a == b, f"call {i}: replies differ"
    for i, (a, b) in enumerate(zip(first.snapshots, again.snapshots, strict=True)):
        assert a == b, f"call {i}: stores differ"


#: where a SQLite project's instances are (the config's default `[state] dir`), from the root
SQLITE_INSTANCES = "project/.smllm/state/smllm.db"


def as_sqlite(snapshot: str) -> dict[str, Any]:
    """A snapshot of a play on PostgreSQL in the form of one on SQLite: the namespace's rows as
    the instance store's file would hold them (empty tables left out, and SQLite's own
    bookkeeping); a SQLite snapshot goes through the same."""
    snap: dict[str, dict[str, Any]] = json.loads(snapshot)
    instances = snap.pop(PG_KEY, None) or snap.pop(SQLITE_INSTANCES, {})
    snap["instances"] = {
        t: rows for t, rows in instances.items() if t in ("instances", "history") and rows
    }
    return snap


@pytest.mark.parametrize("case", list(CASES))
@PG_PROPERTY_SETTINGS
@given(data=st.data())
def test_engine_properties_on_postgres(case: str, data: st.DataObject, pg_server: Any) -> None:
    """The same properties with the instance store in a namespace of the test server; the
    replay in a second namespace, and a third play on SQLite that must agree with it."""
    scenario = data.draw(scenarios(case), label="scenario")
    url = pg_server.url()
    one, two = (PgTarget(url, f"prop-{uuid.uuid4().hex[:12]}") for _ in range(2))
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        first = play(Path(tmp) / "one", case, scenario, check=True, pg=one)
        again = play(Path(tmp) / "two", case, scenario, check=False, pg=two)
        lite = play(Path(tmp) / "three", case, scenario, check=False)
    same_play(first, again)
    for i, (a, b) in enumerate(zip(first.replies, lite.replies, strict=True)):
        assert a == b, f"call {i}: replies differ on PostgreSQL and SQLite"
    for i, (a, b) in enumerate(zip(first.snapshots, lite.snapshots, strict=True)):
        assert as_sqlite(a) == as_sqlite(b), f"call {i}: stores differ on PostgreSQL and SQLite"


# -- single examples ---------------------------------------------------------------------------


@pytest.fixture
def pg(backend: str, request: pytest.FixtureRequest) -> PgTarget | None:
    """Where the single examples keep their instances: SQLite (None), or a namespace of the
    test server."""
    if backend == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_server").url()
    return PgTarget(url, f"prop-{uuid.uuid4().hex[:12]}")


@contextmanager
def small_world(case: str, pg: PgTarget | None = None) -> Iterator[App]:
    """An App over the case's machines in a fresh temp folder, with a ScriptedHost (its
    instances in PG's namespace, when given; the connection closed at the end)."""
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp)
        project = build_project(root, case, pg)
        with environment(root, pg):
            app = App(cwd=str(project), host=ScriptedHost(1))
            try:
                yield app
            finally:
                for store in app.opened.values():
                    store.close()


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


def test_left_instance_without_holder_is_named_by_status(pg: PgTarget | None) -> None:
    """engine.md §7.1: a held instance that another session took over and paused has no
    holder; the first session's next call reads `doc README.md is paused; you are in idle`.
    (smllm said `moved to session None` until 8d8dfda; kept as a regression test.)"""
    with small_world("final", pg) as app:
        a, b = bound(app, "a"), bound(app, "b")
        doc = (("stateMachine", "final"), ("docPath", "README.md"))
        assert app.fire(a, "enter", doc).ok
        assert app.fire(b, "enter", doc).ok
        assert app.fire(b, "pause").ok
        result = app.fire(a, "yield")
        assert not result.ok
        assert result.reply.error == "doc README.md is paused; you are in idle"


def test_runaway_stop_writes_only_its_audit(pg: PgTarget | None) -> None:
    """engine.md §9 rule 6: a runaway stop writes the audit record `runaway` and nothing else.
    (App.stop also bumped the session's version until 7704c02; kept as a regression test.)"""
    with small_world("final", pg) as app:
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
    write: Callable[[App, str], Callable[[], object]], pg: PgTarget | None
) -> None:
    """engine.md §3: a session's lastActive moves on every write, these three included.
    (They left it until 7704c02; kept as a regression test.)"""
    with small_world("final", pg) as app:
        a = bound(app, "a")
        assert app.fire(a, "enter", (("stateMachine", "final"),)).ok
        call = write(app, a)
        before = app.user.session(a)
        call()
        after = app.user.session(a)
        assert before is not None and after is not None
        assert after.version > before.version  # the session was written
        assert after.last_active > before.last_active
