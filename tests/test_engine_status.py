"""The status of a session as `smllm status` and the status line read it (engine/status.py),
exactly: in idle, in a machine, yielded, with paused instances and an interrupted slot, and
after the instance it held left, went, or was taken by another session."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.engine_worlds import Scripted, dev_world, enter, fire

from smllm.engine.status import Status, status


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


def now(world: Scripted, key: str) -> Status:
    return status(world.loaded, world.session(key), world.reader)


def test_status_of_an_idle_session(world: Scripted) -> None:
    key = world.new_session().key
    s = now(world, key)
    assert s == Status(key, None, None, False, None, None, 0)
    assert s.visit is None
    assert s.to_json() == {
        "session": key,
        "idle": True,
        "machine": None,
        "state": None,
        "visit": None,
        "yielded": False,
        "instance": None,
        "interrupted": None,
        "paused": 0,
    }


def test_status_in_a_machine_then_yielded(world: Scripted) -> None:
    key = world.new_session().key
    enter(world, key, "GH-1")
    s = now(world, key)
    held = s.held
    assert held is not None and held.ref == "GH-1" and held.state == "PLAN"
    assert (s.kind, s.yielded, s.interrupted, s.interrupted_kind, s.paused) == (
        "issue",
        False,
        None,
        None,
        0,
    )
    assert s.visit == 1
    instance = {
        "machine": "dev",
        "kind": "issue",
        "id": held.id,
        "ref": "GH-1",
        "label": "GH-1",
        "status": "active",
    }
    assert s.to_json() == {
        "session": key,
        "idle": False,
        "machine": "dev",
        "state": "PLAN",
        "visit": 1,
        "yielded": False,
        "instance": instance,
        "interrupted": None,
        "paused": 0,
    }
    fire(world, key, "yield")
    s = now(world, key)
    assert s.yielded is True and s.to_json()["yielded"] is True


def test_status_counts_paused_and_shows_the_slot(world: Scripted) -> None:
    key = world.new_session().key
    enter(world, key, "GH-1")
    fire(world, key, "pause")
    enter(world, key, "GH-2")
    fire(world, key, "pause")
    enter(world, key, "GH-3")
    fire(world, key, "unmatched")
    s = now(world, key)
    slot = s.interrupted
    assert s.held is None and s.kind is None and s.paused == 2
    assert slot is not None and slot.ref == "GH-3" and slot.status == "interrupted"
    assert s.interrupted_kind == "issue"
    assert s.to_json()["interrupted"] == {
        "machine": "dev",
        "kind": "issue",
        "id": slot.id,
        "ref": "GH-3",
        "label": "GH-3",
        "status": "interrupted",
    }
    assert s.to_json()["idle"] is True and s.to_json()["yielded"] is False


def test_a_yielded_flag_left_in_idle_reads_false(world: Scripted) -> None:
    s = Status("k", None, None, True, None, None, 0)
    assert s.to_json()["yielded"] is False


def test_status_of_a_session_whose_instance_left(world: Scripted) -> None:
    key = world.new_session().key
    enter(world, key, "GH-1")
    other = world.new_session().key
    enter(world, other, "GH-1")  # takes it over
    s = now(world, key)
    assert (s.held, s.kind) == (None, None)


def test_a_slot_taken_by_another_session_is_not_shown(world: Scripted) -> None:
    key = world.new_session().key
    enter(world, key, "GH-1")
    fire(world, key, "unmatched")
    assert now(world, key).interrupted is not None
    other = world.new_session().key
    enter(world, other, "GH-1")
    s = now(world, key)
    assert (s.interrupted, s.interrupted_kind) == (None, None)


def test_status_of_a_session_whose_held_instance_is_gone(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    s = world.session(key)
    assert s.holding is not None
    del world.reader.instances[s.holding.id]
    got = status(world.loaded, s, world.reader)
    assert (got.held, got.kind) == (None, None)


def test_status_shows_a_slot_only_while_it_is_interrupted(world: Scripted) -> None:
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    s = world.session(key)
    assert s.holding is not None
    # a slot naming the instance the session holds (active): not an interrupted one
    got = status(world.loaded, s._replace(interrupted=s.holding), world.reader)
    assert (got.interrupted, got.interrupted_kind) == (None, None)
    assert got.held is not None and got.held.ref == "GH-1"
