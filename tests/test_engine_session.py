"""A session in the engine (engine/context.py, recover.py): the key a new session draws, the
session a keyless enter makes, the folder its commands run in, the id a new instance gets, and
its recovery after a call ended between saving the instance and the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.engine_machines import STEPS
from helpers.engine_worlds import T0, Scripted, dev_world, inst, machines_world, try_fire
from helpers.memory_world import World
from helpers.scripted_host import ScriptedHost

from smllm.engine.fire import fire
from smllm.engine.records import AuditRecord, Instance, Place, Session, SessionWrite
from smllm.engine.recover import recovery


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


# --- context: a new session, the commands' folder, a new instance's id ----------------------------


def test_new_session_draws_a_free_key() -> None:
    from smllm.engine.context import new_session

    class Keys:
        def __init__(self) -> None:
            self.asked: list[str] = []
            self.keys = iter(["sm-a", "sm-b", "sm-c"])

        def new_id(self, prefix: str) -> str:
            self.asked.append(prefix)
            return prefix + next(self.keys)[3:]

    host = Keys()
    taken = {"sm-a", "sm-b"}
    made = new_session(host, taken.__contains__, "claude", "h", "/p", ("c",), T0)  # type: ignore[arg-type]
    assert made == Session("sm-c", "claude", "h", "/p", ("c",), None, None, False, 0, 1, T0, T0)
    assert host.asked == ["sm-", "sm-", "sm-"]
    assert made.yielded is False


def test_a_keyless_enter_makes_a_session_with_the_host_s_session(world: Scripted) -> None:
    call = world.call(None, "enter", ("stateMachine", "dev"))._replace(
        host_session="h-1", harness="claude"
    )
    out = fire(world.loaded, call, world.reader, world.host)
    assert out.ok and out.session is not None and out.session.create
    made = out.session.session
    assert (made.host_session, made.harness, made.cwd) == ("h-1", "claude", world.cwd)
    assert out.audit[0].kind == "bind"
    assert out.audit[0].detail["hostSession"] == "h-1"


def test_commands_run_in_the_session_s_folder(tmp_path: Path) -> None:
    world = machines_world(tmp_path, STEPS, dirs=("sub",))
    key = world.new_session().key
    call = world.call(key, "enter", ("stateMachine", "steps"))._replace(cwd="/elsewhere")
    out = fire(world.loaded, call, world.reader, world.host)
    assert out.ok
    assert {c.cwd for c in world.host.calls} == {world.cwd}


def test_a_new_instance_never_takes_a_stored_id(world: Scripted) -> None:
    key = world.new_session().key
    first = try_fire(world, key, "enter", ("stateMachine", "dev")).instances[0].instance.id
    assert first.startswith("i-") and len(first) == 8
    # the same draws again, with that id taken (by an instance with a ref)
    again = World(world.loaded, ScriptedHost(seed=1), cwd=world.cwd)
    key2 = again.new_session().key
    assert key2 == key
    again.reader.instances[first] = inst(id=first, ref="GH-9", status="paused", holder=None)
    write = try_fire(again, key2, "enter", ("stateMachine", "dev")).instances[0]
    assert write.instance.id != first and write.instance.id.startswith("i-")
    assert write.expected == 0


# --- recover.recovery -----------------------------------------------------------------------------


AT = "2026-01-02T03:04:05.000006Z"


def sess(**changes: Any) -> Session:
    s = Session("k", "none", None, "/p", ("c",), None, None, False, 0, 3, T0, T0)
    return s._replace(**changes)


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
