"""Still more of the engine asserted exactly, for mutants that scripts/mutation found
surviving in src/smllm/engine/ (issue 12 §4): a session's recovery after a call ended between
its two commits (engine/recover.py), ..."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost

from smllm.engine.fire import fire
from smllm.engine.records import (
    AuditRecord,
    Instance,
    Place,
    Session,
    SessionWrite,
)
from smllm.engine.recover import recovery
from smllm.machine.configs.config import load_configs
from smllm.text.block import render

HERE = Path(__file__).resolve().parent
FALLBACK = HERE / "machines" / "fallback.smllm.yaml"
T0 = "2026-01-01T00:00:00.000000Z"
AT = "2026-01-02T03:04:05.000006Z"
Scripted = World[ScriptedHost]


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def try_fire(world: Scripted, key: str | None, event: str, *params: tuple[str, Any]) -> Any:
    return fire(world.loaded, world.call(key, event, *params), world.reader, world.host)


def lines(reply: Any) -> list[str]:
    return render(reply).split("\n")


def inst(**changes: Any) -> Instance:
    i = Instance("i-1", "dev", "GH-1", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T0, T0)
    return i._replace(**changes)


def sess(**changes: Any) -> Session:
    s = Session("k", "none", None, "/p", ("c",), None, None, False, 0, 3, T0, T0)
    return s._replace(**changes)


# --- recover.recovery -------------------------------------------------------------------------

_ENDED = ": a call ended between saving the instance and the session"


class Clock:
    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> str:
        self.reads += 1
        return AT


def recover(world: Scripted, s: Session, *held: Instance) -> Any:
    clock = Clock()
    found = recovery(world.loaded, s, list(held), clock)
    assert clock.reads == (0 if found is None else 1)
    return found


def test_recovery_takes_back_an_active_instance(world: Scripted) -> None:
    s = sess()
    sw, audit = recover(world, s, inst())
    new = s._replace(holding=Place("dev", "i-1"), version=4, last_active=AT)
    assert sw == SessionWrite(new, False, None, frozenset({"holding", "lastActive"}))
    message = "issue GH-1 is held again" + _ENDED
    assert audit == (AuditRecord(AT, "moved", {"message": message}),)


def test_recovery_of_a_resume_that_committed_empties_the_slot(world: Scripted) -> None:
    s = sess(interrupted=Place("dev", "i-1"))
    sw, _audit = recover(world, s, inst())
    new = s._replace(holding=Place("dev", "i-1"), interrupted=None, version=4, last_active=AT)
    changes = frozenset({"holding", "interrupted", "lastActive"})
    assert sw == SessionWrite(new, False, None, changes)
    # a slot holding another instance stays
    other = sess(interrupted=Place("dev", "i-9"))
    sw, _audit = recover(world, other, inst())
    assert sw.session.interrupted == Place("dev", "i-9")
    assert sw.changes == frozenset({"holding", "lastActive"})


def test_recovery_refills_an_empty_slot(world: Scripted) -> None:
    s = sess()
    sw, audit = recover(world, s, inst(status="interrupted", machine="gone"))
    new = s._replace(interrupted=Place("gone", "i-1"), version=4, last_active=AT)
    assert sw == SessionWrite(new, False, None, frozenset({"interrupted", "lastActive"}))
    # a machine no longer configured names its instance "instance"
    message = "instance GH-1 is interrupted again" + _ENDED
    assert audit == (AuditRecord(AT, "moved", {"message": message}),)


def test_recovery_of_both(world: Scripted) -> None:
    s = sess()
    held = (inst(), inst(id="i-2", ref=None, status="interrupted", machine="fallback"))
    sw, audit = recover(world, s, *held)
    new = s._replace(
        holding=Place("dev", "i-1"),
        interrupted=Place("fallback", "i-2"),
        version=4,
        last_active=AT,
    )
    changes = frozenset({"holding", "interrupted", "lastActive"})
    assert sw == SessionWrite(new, False, None, changes)
    kind = world.loaded.machines["fallback"].kind
    message = f"issue GH-1 is held again; {kind} i-2 is interrupted again" + _ENDED
    assert audit == (AuditRecord(AT, "moved", {"message": message}),)


def test_recovery_finds_nothing_to_change(world: Scripted) -> None:
    # the first of each kind held by the session counts; others' and paused ones don't
    assert recover(world, sess()) is None
    assert recover(world, sess(), inst(holder="k2")) is None
    assert recover(world, sess(), inst(status="interrupted", holder="k2")) is None
    assert recover(world, sess(), inst(status="paused")) is None
    assert recover(world, sess(), inst(status="completed")) is None
    # a session that holds one already, or an interrupted one beside a full slot
    assert recover(world, sess(holding=Place("dev", "i-5")), inst()) is None
    full = sess(interrupted=Place("dev", "i-5"))
    assert recover(world, full, inst(status="interrupted")) is None


def test_recovery_picks_the_first_held_by_the_session(world: Scripted) -> None:
    held = (
        inst(id="i-0", holder="k2"),
        inst(id="i-1", status="interrupted", holder="k2"),
        inst(id="i-2", status="paused"),
        inst(id="i-3"),
        inst(id="i-4", status="interrupted"),
        inst(id="i-5"),
        inst(id="i-6", status="interrupted"),
    )
    sw, _audit = recover(world, sess(), *held)
    assert sw.session.holding == Place("dev", "i-3")
    assert sw.session.interrupted == Place("dev", "i-4")
