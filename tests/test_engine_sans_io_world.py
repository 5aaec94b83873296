"""The in-memory world of test_engine_sans_io.py on its own: its paused order (engine.md §5.3),
its commits (all or nothing, unique refs), that it and the engine run without SQLite, and that
random calls through it and through the SQLite `App` give byte-identical replies and records
(engine.md §12)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers.memory_world import DEV_MACHINE, MemoryReader, World, paused_order, write_project
from helpers.property_settings import WORLD_SETTINGS
from helpers.scripted_host import ScriptedHost
from hypothesis import event as tally
from hypothesis import given
from hypothesis import strategies as st

from smllm.engine.fire import fire
from smllm.engine.idle import sort_paused
from smllm.engine.records import HistoryRecord, Instance, InstanceWrite
from smllm.engine.view import view
from smllm.errors import RefTaken, StoreConflict
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

HERE = Path(__file__).resolve().parent
FALLBACK = HERE / "machines" / "fallback.smllm.yaml"
ENTER_GH1 = (("stateMachine", "dev"), ("issueId", "GH-1"))
Params = tuple[tuple[str, Any], ...]
Scripted = World[ScriptedHost]  # a world whose host tests can script


def at(n: int) -> str:
    """The scripted clock's reading number `n` (one second a reading from 2026-01-01)."""
    return f"2026-01-01T00:00:{n:02d}.000000Z"


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def test_paused_order_is_engine_md_5_3() -> None:
    """Most recently updated first; ties by machine id, then label, by code point."""
    rows = [  # id, machine, ref, updated
        ("i-000001", "dev", "GH-9", 1),
        ("i-000002", "dev", "GH-10", 1),  # "GH-10" < "GH-9" by code point
        ("i-000003", "fallback", None, 1),
        ("i-000004", "dev", None, 2),
        ("i-000005", "Dev", "a", 1),  # "D" < "d"
        ("i-000006", "dev", "GH-5", 0),
        ("i-000007", "other", "x", 3),  # not asked for
    ]
    made = [
        Instance(i, m, r, "S", "paused", None, None, 2, {}, None, at(0), at(u))
        for i, m, r, u in rows
    ]
    reader = MemoryReader()
    reader.instances = {i.id: i for i in reversed(made)}
    want = ["i-000004", "i-000005", "i-000002", "i-000001", "i-000003", "i-000006"]
    asked = ["dev", "fallback", "Dev"]
    assert [
        [i.id for i in found]
        for found in [reader.paused(asked, None)[0], reader.paused(asked, 3)[0]]
    ] == [want, want[:3]]
    assert reader.paused(asked, 3)[1] == 6
    engine = [i for i in made if i.machine in asked]
    sort_paused(engine)
    assert [i.id for i in engine] == want == [i.id for i in paused_order(engine[::-1])]


def test_the_idle_list_shows_paused_in_that_order(world: Scripted) -> None:
    world.host.step *= 0  # every reading the same: every paused instance ties on `updated`
    key = world.new_session().key
    for ref in ("GH-10", "GH-9", "GH-1"):
        world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", ref))
        world.fire(key, "pause")
    world.fire(key, "enter", ("stateMachine", "fallback"), ("taskId", "T-1"))
    text = render(world.fire(key, "pause").outcome.reply)
    assert text.split("Paused:\n")[1].split("\nFire one event")[0].splitlines() == [
        "- issue GH-1 (dev) at PLAN",
        "- issue GH-10 (dev) at PLAN",
        "- issue GH-9 (dev) at PLAN",
        "- task T-1 (fallback) at WORK",
    ]


def test_a_commit_is_all_or_nothing(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", *ENTER_GH1)
    stale = world.fire(key, "pause").outcome.instances[0]  # expects version 1; 2 is stored
    second = world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-2"))
    inst = second.outcome.instances[0].instance
    record = HistoryRecord(at(9), key, "agent", "x", {}, "PLAN", "PLAN", None, "active", 2, ())
    fresh = InstanceWrite(inst._replace(version=2), 1, record)
    before = world.reader.dump()
    with pytest.raises(StoreConflict):  # the first write is good, the second is stale
        world.reader.apply_instances([fresh, stale])
    assert world.reader.dump() == before
    renamed = InstanceWrite(inst._replace(ref="GH-1", version=2), 1, record)
    with pytest.raises(RefTaken):
        world.reader.apply_instances([renamed])
    assert world.reader.dump() == before


def test_a_session_write_fails_when_its_holding_changed(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", *ENTER_GH1)
    call = world.call(key, "yield")
    out = fire(world.loaded, call, world.reader, world.host)
    assert out.session is not None and out.session.expected_holding is not None
    world.fire(key, "pause")  # meanwhile: holding is None now
    before = world.reader.dump()
    with pytest.raises(StoreConflict):
        world.reader.apply_session(out.session, out.audit)
    assert world.reader.dump() == before


def test_a_call_cut_off_between_its_two_commits(world: Scripted) -> None:
    """engine.md §10: the instance committed, the session not; the instance is the truth."""
    key = world.new_session().key
    crash = world.call(key, "enter", *ENTER_GH1)
    world.reader.apply_instances(fire(world.loaded, crash, world.reader, world.host).instances)
    assert world.session(key).holding is None
    before = world.reader.dump()
    header = f"session {key} · dev › PLAN · issue GH-1"
    assert render(world.view(key)).splitlines()[1] == header  # shown held, nothing written
    assert world.reader.dump() == before
    assert world.fire(key, "yield").committed.ok  # the call writes the recovery first
    cut = "a call ended between saving the instance and the session"
    assert world.reader.audit[key][-2].detail == {"message": f"issue GH-1 is held again: {cut}"}
    crash = world.call(key, "unmatched")
    world.reader.apply_instances(fire(world.loaded, crash, world.reader, world.host).instances)
    fired = world.fire(key, "yield")  # still holding it: §7.1 sends the session to idle
    assert render(fired.committed.reply).splitlines()[2] == (
        "error: issue GH-1 is interrupted; you are in idle"
    )
    assert world.fire(key, "resume").committed.ok  # the slot is recovered first
    message = f"issue GH-1 is interrupted again: {cut}"
    assert world.reader.audit[key][-2].detail == {"message": message}


def test_two_new_instances_race_for_one_ref(world: Scripted) -> None:
    calls = [world.call(None, "enter", ("stateMachine", "dev"), ("issueId", "GH-9")) for _ in "ab"]
    outs = [fire(world.loaded, c, world.reader, world.host) for c in calls]
    assert all(o.ok for o in outs)
    world.commit(calls[0], outs[0])
    with pytest.raises(RefTaken):
        world.reader.apply_instances(outs[1].instances)
    fired = world.commit(calls[1], outs[1])  # as App.commit: the engine's `lost` reply
    assert fired.session is None and fired.committed.session is None  # keyless: no session made
    assert render(fired.committed.reply).splitlines()[1:3] == [
        "no session · idle",
        "error: another issue of dev already has ref GH-9",
    ]
    assert len(world.reader.instances) == 1 and len(world.reader.sessions) == 1


SCENARIO = """
import sys
sys.modules["sqlite3"] = sys.modules["_sqlite3"] = None  # any import of them fails
sys.path.insert(0, sys.argv[1])
from helpers.memory_world import World
from helpers.scripted_host import ScriptedHost
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

world = World(load_configs((sys.argv[2],)), ScriptedHost(seed=1), cwd=sys.argv[3])
key = world.new_session().key
world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
world.host.files.add("PLAN.md")
world.fire(key, "planned", ("size", "small"))
world.stop(key, None)
world.prompt(key)
print(render(world.view(key)).splitlines()[3])
done = render(world.fire(key, "done").committed.reply).splitlines()
print(next(line for line in done if line.startswith("Completed")))
print(sorted(m for m in sys.modules if m.startswith(("smllm.store", "smllm.api.app"))))
"""


def test_the_world_runs_without_sqlite(tmp_path: Path) -> None:
    cwd, config = write_project(tmp_path, DEV_MACHINE)
    ran = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(HERE), config, cwd],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "Make the change that PLAN.md describes, then fire done.",
        "Completed issue GH-1. You are now in idle.",
        "[]",  # no store module was imported
    ]


# -- engine.md §12: the same calls give the same replies and records as the SQLite App ------------

MENU: tuple[tuple[str, Params], ...] = (
    ("enter", ENTER_GH1),
    ("enter", (("stateMachine", "dev"), ("issueId", "GH-2"), ("state", "PLAN"))),
    ("enter", (("stateMachine", "dev"),)),
    ("enter", (("stateMachine", "fallback"), ("taskId", "T-1"))),
    ("enter", (("stateMachine", "dev"), ("issueId", "bad"))),
    ("planned", (("size", "small"),)),
    ("planned", (("size", "huge"),)),
    ("done", ()),
    ("handled", ()),
    ("yield", (("note", 'two\nlines "q"'),)),
    ("pause", ()),
    ("unmatched", ()),
    ("resume", ()),
    ("listPaused", ()),
    ("<keyless>", (("stateMachine", "dev"), ("issueId", "GH-3"))),
    ("<stop>", ()),
    ("<prompt>", ()),
    ("<view>", ()),
    ("<plan>", ()),  # PLAN.md appears or goes: the dev guard's answer
)
OFFERED = ("<offered>", ())  # an event the session's view offers, picked by the step
#: the params of an offered event (enter: one of these, by the step)
FIT = {
    "enter": tuple(p for e, p in MENU if e == "enter"),
    "planned": (MENU[5][1],),
    "yield": (MENU[9][1],),
}
STEP = st.tuples(
    st.integers(0, 5),
    st.sampled_from((*MENU, *[OFFERED] * len(MENU))),
    st.sampled_from((None, True, False)),
)
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # SQLite syncs every commit


def _sqlite_dump(app: Any, configs: tuple[str, ...]) -> dict[str, Any]:
    """`MemoryReader.dump` of the App's stores, read through their own API."""
    from smllm.api.stores import Stores

    stores = Stores(app.load(configs), app.user, app.opened)
    found = sorted((i.id, s, i) for s in stores.instance_stores() for i in s.instances(None, None))
    sessions = sorted(app.user.sessions(), key=lambda s: s.key)
    return {
        "instances": [i.to_json() for _, _, i in found],
        "history": {i.id: [h.to_json() for h in s.history(i.machine, i.id)] for _, s, i in found},
        "sessions": [s.to_json() for s in sessions],
        "audit": {  # as `MemoryReader.dump`: sessions with audit records only
            s.key: [[a.at, a.kind, a.detail] for a in audit]
            for s in sessions
            if (audit := app.user.audit(s.key))
        },
    }


@WORLD_SETTINGS
@given(
    seed=st.integers(0, 2**16),
    tick=st.sampled_from((0, 1)),
    plan=st.booleans(),
    steps=st.lists(STEP, min_size=5, max_size=40),
)
def test_same_replies_as_the_sqlite_app(
    seed: int, tick: int, plan: bool, steps: list[tuple[int, tuple[str, Params], bool | None]]
) -> None:
    """Random calls of two or more sessions (takeovers, stale slots, §7.1, stops) through the
    App and through the world: every reply and, after each call, every record the same."""
    from datetime import timedelta
    from unittest import mock

    from smllm.api.app import App  # here, so that importing this module never loads SQLite
    from smllm.jsontext import dumps

    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = Path(tmp)
        xdg = ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME")
        with mock.patch.dict(os.environ, {n: str(root / n.lower()) for n in xdg}):
            os.environ.pop("SMLLM_CONFIG", None)
            cwd, _config = write_project(root, DEV_MACHINE, FALLBACK)
            files = {"PLAN.md"} if plan else set()
            hosts = [ScriptedHost(seed, step=timedelta(seconds=tick), files=files) for _ in "ab"]
            app = App(cwd=cwd, host=hosts[0])
            configs = app.configs_here()
            world = World(load_configs(configs), hosts[1], cwd=cwd, configs=configs)
            try:
                keys = [app.new_session().key for _ in "ab"]
                assert [world.new_session().key for _ in "ab"] == keys
                for n, (who, (event, params), continuing) in enumerate(steps):
                    key = keys[who % len(keys)]
                    if event == "<offered>":  # the engine's view alone reads no clock
                        shown = view(world.loaded, world.session(key), world.reader, world.host)
                        names = [i.name for i in shown.events.items] if shown.events else []
                        event = names[who % len(names)] if names else "<view>"
                        params = FIT.get(event, ((),))[(who + n) % len(FIT.get(event, ((),)))]
                    said = f"step {n}: {key} {event} {params} continuing={continuing}"
                    if event == "<plan>":
                        for host in hosts:
                            host.files ^= {"PLAN.md"}
                        continue
                    if event == "<stop>":
                        a, m = app.stop(key, continuing), world.stop(key, continuing)
                        tally(f"stop {a.decision}")
                        a_text = a.decision + (render(a.reply) if a.reply else "")
                        m_text = m.decision + (render(m.reply) if m.reply else "")
                    elif event == "<prompt>":
                        app.prompt_submitted(key)
                        world.prompt(key)
                        a_text = m_text = ""
                    elif event == "<view>":
                        a_text, m_text = app.view(key).text(), render(world.view(key))
                    else:
                        fired_key = None if event == "<keyless>" else key
                        name = "enter" if event == "<keyless>" else event
                        result = app.fire(fired_key, name, params)
                        fired = world.fire(fired_key, name, *params)
                        tally(f"{name} {'accepted' if result.ok else 'refused'}")
                        a_text = f"{result.ok} {result.text()}"
                        m_text = f"{fired.committed.ok} {render(fired.committed.reply)}"
                        made = result.session.key if result.session else None
                        if fired_key is None and made is not None and made not in keys:
                            keys.append(made)
                    assert m_text == a_text, said
                    assert dumps(world.reader.dump()) == dumps(_sqlite_dump(app, configs)), said
            finally:
                app.user.close()
                for store in app.opened.values():
                    store.close()
