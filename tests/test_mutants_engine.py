"""The engine's values asserted exactly, written to kill mutants that scripts/mutation found
surviving (or reached by no in-process test) in src/smllm/engine/ (issue 12 §4): the status
line's values (engine/status.py), the records' JSON, and the idle helpers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from memory_world import DEV_MACHINE, World, write_project
from scripted_host import ScriptedHost

from smllm.engine.held import kind_of, left_message
from smllm.engine.idle import sort_paused
from smllm.engine.records import (
    AuditRecord,
    HistoryRecord,
    Instance,
    Place,
    Session,
    SessionWrite,
    block_digest,
    iso,
    minute,
    repeats_block,
)
from smllm.engine.status import Status, status
from smllm.errors import StoreConflict
from smllm.machine.configs.config import load_configs

HERE = Path(__file__).resolve().parent
FALLBACK = HERE / "machines" / "fallback.smllm.yaml"
T0 = "2026-01-01T00:00:00.000000Z"
Scripted = World[ScriptedHost]


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    cwd, config = write_project(tmp_path, DEV_MACHINE, FALLBACK)
    return World(load_configs((config,)), ScriptedHost(seed=1), cwd=cwd)


def fire(world: Scripted, key: str, event: str, *params: tuple[str, Any]) -> None:
    fired = world.fire(key, event, *params)
    assert fired.committed.ok, fired.committed.reply


def enter(world: Scripted, key: str, ref: str, machine: str = "dev") -> None:
    param = "issueId" if machine == "dev" else "taskId"
    fire(world, key, "enter", ("stateMachine", machine), (param, ref))


def now(world: Scripted, key: str) -> Status:
    return status(world.loaded, world.session(key), world.reader)


def inst(**changes: Any) -> Instance:
    i = Instance("i-1", "dev", "GH-1", "PLAN", "active", "k", None, 1, {"PLAN": 1}, None, T0, T0)
    return i._replace(**changes)


def sess(**changes: Any) -> Session:
    s = Session("k", "none", None, "/p", ("c",), None, None, False, 0, 1, T0, T0)
    return s._replace(**changes)


# --- status.py --------------------------------------------------------------------------------


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


# --- idle.py ----------------------------------------------------------------------------------


def test_kind_of_and_left_message(world: Scripted) -> None:
    assert kind_of(world.loaded, "dev") == "issue"
    assert kind_of(world.loaded, "gone") == "instance"
    s = sess()
    place = Place("dev", "i-1")
    assert left_message(world.loaded, s, None, place) == (
        "instance i-1 no longer exists; you are in idle"
    )
    assert left_message(world.loaded, s, inst(holder="k2"), place) == (
        "issue GH-1 moved to session k2; you are in idle"
    )
    assert left_message(world.loaded, s, inst(status="paused", holder=None), place) == (
        "issue GH-1 is paused; you are in idle"
    )
    assert left_message(world.loaded, s, inst(), place) is None
    assert left_message(world.loaded, s, inst(holder=None), place) is None


def test_sort_paused() -> None:
    a = inst(id="a", ref="B", machine="x", updated="2026-01-02")
    b = inst(id="b", ref="A", machine="x", updated="2026-01-02")
    c = inst(id="c", ref="Z", machine="w", updated="2026-01-02")
    d = inst(id="d", ref="A", machine="a", updated="2026-01-01")
    found = [d, a, b, c]
    sort_paused(found)
    assert [i.id for i in found] == ["c", "b", "a", "d"]


# --- records.py -------------------------------------------------------------------------------


def test_instance_json_both_ways() -> None:
    i = inst(ref=None, holder_seen=T0, resume_state="WORK", version=4, visits={"PLAN": 2})
    d = {
        "id": "i-1",
        "machine": "dev",
        "ref": None,
        "state": "PLAN",
        "status": "active",
        "holder": "k",
        "holderSeen": T0,
        "version": 4,
        "visits": {"PLAN": 2},
        "resumeState": "WORK",
        "created": T0,
        "updated": T0,
    }
    assert i.to_json() == d
    assert Instance.from_json(d) == i
    assert i.label == "i-1" and inst().label == "GH-1"
    assert i.place == Place("dev", "i-1")


def test_session_json_both_ways() -> None:
    s = sess(
        host_session="h",
        holding=Place("dev", "i-1"),
        interrupted=Place("fallback", "i-2"),
        yielded=True,
        blocks=2,
        version=5,
        last_active="2026-01-02T00:00:00.000000Z",
    )
    d = {
        "key": "k",
        "harness": "none",
        "hostSession": "h",
        "cwd": "/p",
        "configs": ["c"],
        "holding": {"machine": "dev", "id": "i-1"},
        "interrupted": {"machine": "fallback", "id": "i-2"},
        "yielded": True,
        "blocks": 2,
        "version": 5,
        "created": T0,
        "lastActive": "2026-01-02T00:00:00.000000Z",
    }
    assert s.to_json() == d
    assert Session.from_json(d) == s
    marked = s._replace(last_block="abc")
    assert marked.to_json() == {**d, "lastBlock": "abc"}
    assert Session.from_json({**d, "lastBlock": "abc"}) == marked
    bare = sess()
    assert bare.to_json()["holding"] is None and bare.to_json()["interrupted"] is None
    assert Session.from_json(bare.to_json()) == bare


def test_history_json() -> None:
    h = HistoryRecord(T0, "k", "host", "go", {"a": 1}, None, "PLAN", "why", "active", 2, ("t",))
    assert h.to_json() == {
        "at": T0,
        "session": "k",
        "source": "host",
        "event": "go",
        "params": {"a": 1},
        "from": None,
        "to": "PLAN",
        "arrival": "why",
        "status": "active",
        "version": 2,
        "trace": ["t"],
    }
    assert AuditRecord(T0, "bind", {}).kind == "bind"


def test_minute() -> None:
    assert minute("2026-03-04T05:06:07.890Z") == "2026-03-04 05:06 UTC"


def test_history_from_json() -> None:
    h = HistoryRecord(T0, "k", "host", "go", {"a": 1}, "A", "B", "why", "paused", 3, ("x", "y"))
    assert HistoryRecord.from_json(h.to_json()) == h
    i = inst(holder_seen=T0, resume_state="WORK")
    assert Instance.from_json(i.to_json()) == i


def test_session_write_merge() -> None:
    current = sess(holding=Place("dev", "i-1"), blocks=1, version=7, last_block="old")
    new = sess(
        holding=None,
        interrupted=Place("dev", "i-1"),
        yielded=True,
        blocks=3,
        last_active="L",
        last_block="new",
    )
    every = frozenset({"holding", "interrupted", "yielded", "blocks", "lastActive", "lastBlock"})
    merged = SessionWrite(new, False, Place("dev", "i-1"), every).merge(current)
    assert merged == new._replace(version=8)
    kept = SessionWrite(new, False, Place("dev", "i-1"), frozenset()).merge(current)
    assert kept == current._replace(version=8)
    for name, field in (
        ("holding", "holding"),
        ("interrupted", "interrupted"),
        ("yielded", "yielded"),
        ("blocks", "blocks"),
        ("lastActive", "last_active"),
        ("lastBlock", "last_block"),
    ):
        one = SessionWrite(new, False, Place("dev", "i-1"), frozenset({name})).merge(current)
        assert one == current._replace(version=8, **{field: getattr(new, field)}), name
    with pytest.raises(StoreConflict):
        SessionWrite(new, False, None, every).merge(current)


def test_block_digest_and_repeats() -> None:
    sha_ab = "fb8e20fc2e4c3f248c60c39bd652f3c1347298bb977b8b4d5903b85055620603"
    assert block_digest("ab") == f"2:{sha_ab}"
    assert block_digest(" a\r\nb\rc \n") == block_digest("a\nb\nc")
    assert block_digest("a\r\nb").startswith("3:")
    assert block_digest("é").startswith("1:")
    digest = block_digest("the block")
    assert repeats_block(digest, "the block")
    assert repeats_block(digest, "  <t>x</t>\n\nthe block\n")
    assert not repeats_block(digest, "the bloc")
    assert not repeats_block(digest, "he block")
    assert not repeats_block(digest, "the block!")
    assert not repeats_block("x:" + digest.split(":")[1], "the block")
    assert not repeats_block("٣:" + digest.split(":")[1], "the block")
    assert not repeats_block(block_digest(""), "")
    assert not repeats_block(block_digest(""), "anything")


def test_iso() -> None:
    at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    assert iso(at) == "2026-03-04T05:06:07.890123Z"
    east = at.astimezone(timezone(timedelta(hours=2)))
    assert iso(east) == "2026-03-04T05:06:07.890123Z"


# --- fire.py / view.py: a saved state that is gone, a machine no longer configured ------------

GONE_NOTE = (
    "Saved state GONE no longer exists in dev. Fire pause, then enter with a state: "
    "PLAN, WORK, DONE"
)


def gone_block(key: str, *lines: str, kind: str = "issue") -> str:
    return "\n".join(
        [
            "<smllm>",
            f"session {key} · dev › GONE · issue GH-1",
            GONE_NOTE,
            *lines,
            f'Fire one event: smllm({{ session: "{key}", event, params }})',
            "<events>",
            f"- pause: Put {kind} GH-1 aside and return to idle.",
            "- unmatched: The request fits none of these; handle it from idle, then resume.",
            "</events>",
            "</smllm>",
        ]
    )


def held_gone(world: Scripted) -> tuple[str, Instance]:
    key = world.new_session().key
    enter(world, key, "GH-1")
    (inst_,) = world.reader.instances.values()
    world.reader.instances[inst_.id] = inst_._replace(state="GONE")
    return key, world.reader.instances[inst_.id]


def try_fire(world: Scripted, key: str, event: str, *params: tuple[str, Any]) -> Any:
    from smllm.engine.fire import fire as engine_fire

    return engine_fire(world.loaded, world.call(key, event, *params), world.reader, world.host)


def test_a_gone_state_offers_only_pause_and_unmatched(world: Scripted) -> None:
    from smllm.text.block import render

    key, gone = held_gone(world)
    assert render(world.view(key)) == gone_block(key)
    for event, params, error in (
        ("planned", (), "planned is not offered here (offered: pause, unmatched)"),
        ("pause", (("a", 1),), "pause takes no params, but got a"),
        ("pause", (("a", 1), ("a", 2)), "pause got param a more than once"),
        ("unmatched", (("b", 1), ("c", 1)), "unmatched takes no params, but got b"),
    ):
        out = try_fire(world, key, event, *params)
        assert (out.ok, out.instances, out.session) == (False, (), None)
        assert render(out.reply) == gone_block(key, f"error: {error}")
    out = try_fire(world, key, "unmatched")
    assert out.ok and [w.instance.status for w in out.instances] == ["interrupted"]
    assert render(out.reply).split("\n")[2] == (
        "Interrupted issue GH-1 at GONE. Handle the request, then fire resume from idle."
    )
    out = try_fire(world, key, "pause")
    (write,) = out.instances
    assert out.ok and (write.instance.status, write.instance.holder) == ("paused", None)
    assert write.instance.state == "GONE" and write.expected == gone.version
    assert render(out.reply).split("\n")[2] == "Paused issue GH-1 at GONE."


def test_a_machine_no_longer_configured(world: Scripted, tmp_path: Path) -> None:
    from smllm.text.block import render

    key = world.new_session().key
    enter(world, key, "GH-1")
    _cwd, config = write_project(tmp_path / "other", FALLBACK)
    other = World(load_configs((config,)), world.host, cwd=world.cwd, reader=world.reader)
    block = "\n".join(
        [
            "<smllm>",
            f"session {key} · dev › PLAN · instance GH-1",
            "error: state machine dev is not configured (its file might have errors); fix the"
            " config, then fire any event: the session goes on where it was",
            f'Fire one event: smllm({{ session: "{key}", event, params }})',
            "<events>",
            "- pause: Put instance GH-1 aside and return to idle.",
            "</events>",
            "</smllm>",
        ]
    )
    assert render(other.view(key)) == block
    for event, params in (("yield", ()), ("pause", (("a", 1),)), ("planned", ())):
        out = try_fire(other, key, event, *params)
        assert (out.ok, out.instances, out.session) == (False, (), None)
        assert render(out.reply) == block
    out = try_fire(other, key, "pause")
    (write,) = out.instances
    assert out.ok and (write.instance.status, write.instance.holder) == ("paused", None)
    assert render(out.reply).split("\n")[1:3] == [
        f"session {key} · idle",
        "Paused instance GH-1 at PLAN.",
    ]


def test_view_in_idle_and_after_the_instance_left(world: Scripted) -> None:
    from smllm.text.block import render

    key = world.new_session().key
    idle = render(world.view(key)).split("\n")
    assert idle[1:3] == [f"session {key} · idle", "State machines:"]
    enter(world, key, "GH-1")
    other = world.new_session().key
    enter(world, other, "GH-1")
    left = render(world.view(key)).split("\n")
    assert left[1:3] == [
        f"session {key} · idle",
        f"issue GH-1 moved to session {other}; you are in idle",
    ]
    assert left[3:] == idle[2:]


def test_list_paused_lists_every_paused_instance(world: Scripted) -> None:
    from smllm.text.block import render

    key = world.new_session().key
    refs = [f"GH-{n}" for n in range(1, 13)]
    for ref in refs:
        enter(world, key, ref)
        fire(world, key, "pause")
    idle = render(world.view(key)).split("\n")
    assert "…and 2 more paused: fire listPaused to list them all." in idle
    assert "- listPaused: List all 12 paused instances." in idle
    out = try_fire(world, key, "listPaused")
    assert out.ok and (out.instances, out.session, out.audit) == ((), None, ())
    lines = render(out.reply).split("\n")
    listed = [f"- issue {ref} (dev) at PLAN" for ref in reversed(refs)]
    assert lines[1:15] == [f"session {key} · idle", "Paused:", *listed]
    assert lines[15] == f'Fire one event: smllm({{ session: "{key}", event, params }})'


# --- rules.py: JSON params --------------------------------------------------------------------


def test_parse_json_text() -> None:
    from smllm.engine.rules import parse_json_text

    assert parse_json_text('{"a": [1, {"b": null}]}') == (True, {"a": [1, {"b": None}]})
    assert parse_json_text('{"a": 1, "a": 2}') == (False, "repeated object key 'a'")
    assert parse_json_text('{"x": {"a": 1, "b": 2, "a": 3}}') == (False, "repeated object key 'a'")
    assert parse_json_text("NaN") == (False, "NaN is not a JSON value")
    assert parse_json_text("1 2") == (False, "Extra data: line 1 column 3 (char 2)")
    deep = (False, "it nests more than 64 levels deep")
    assert parse_json_text("[" * 65 + "]" * 65) == deep
    assert parse_json_text("[" * 64 + "]" * 64)[0] is True
    assert parse_json_text("[" * 100_000 + "]" * 100_000) == deep


def test_non_finite() -> None:
    from smllm.engine.rules import non_finite

    inf, nan = float("inf"), float("nan")
    assert non_finite([1, {"a": [2.0, inf]}]) == inf
    assert non_finite(-inf) == -inf
    found = non_finite({"x": nan})
    assert found is not None and found != found
    assert non_finite([1.5, "a", {"b": 2, "c": [None, True]}]) is None
    assert non_finite({"a": [[[inf]]]}) == inf


def test_json_and_schema_params() -> None:
    from smllm.engine.rules import check_params
    from smllm.machine.model import ParamSpec

    props = {"a": {"type": "integer"}}
    obj = {"type": "object", "properties": props, "required": ["a"], "additionalProperties": False}
    n = ParamSpec("n", True, False, None, None, None, obj, None, False)
    s = ParamSpec(
        "s", False, True, None, None, None, {"type": "string", "minLength": 3}, None, False
    )
    assert check_params("ev", (n, s), None, (("n", '{"a": 1}'),)) == (None, {"n": {"a": 1}})
    assert check_params("ev", (n, s), None, (("n", {"a": 1}), ("s", "abc"))) == (
        None,
        {"n": {"a": 1}, "s": "abc"},
    )
    assert check_params("ev", (n, s), None, (("n", {"a": 1}), ("s", None))) == (
        None,
        {"n": {"a": 1}},
    )
    refused = {
        '{"a": "x", "b": 1, "c": 2}': "ev param n doesn't match its schema. At the root: "
        'Additional properties are not allowed ("b", "c" were unexpected). At /a: "x" is not '
        'of type "integer"',
        '{"a": 1': "ev param n must be a JSON value: Expecting ',' delimiter: line 1 column 8 "
        "(char 7)",
    }
    for text, message in refused.items():
        assert check_params("ev", (n, s), None, (("n", text),)) == (message, {})
    assert check_params("ev", (n, s), None, (("n", {"a": float("nan")}),)) == (
        "ev param n must be a JSON value: nan is not a JSON number",
        {},
    )
    assert check_params("ev", (n, s), None, (("n", {"a": 1}), ("s", "ab"))) == (
        'ev param s doesn\'t match its schema. At the root: "ab" is too short',
        {},
    )
    many = {k: {"type": "integer"} for k in "abcdefghijkl"}
    wide = ParamSpec("w", True, False, None, None, None, {"properties": many}, None, False)
    message, _ = check_params("ev", (wide,), None, (("w", {k: "x" for k in many}),))
    assert message is not None
    assert message.startswith('ev param w doesn\'t match its schema. At /a: "x" is not of type')
    assert message.endswith('At /j: "x" is not of type "integer". And 2 more')


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
