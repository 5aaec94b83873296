"""The engine's records and their helpers, exactly (engine/records.py, held.py, idle.py): an
instance's, a session's and a history record's JSON both ways, a session write's merge, a
block's digest, `iso` and `minute`, what a held instance is called, and the order of paused
instances."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers.engine_worlds import T0, Scripted, dev_world, inst

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
from smllm.errors import StoreConflict


@pytest.fixture
def world(tmp_path: Path) -> Scripted:
    return dev_world(tmp_path)


def sess(**changes: Any) -> Session:
    s = Session("k", "none", None, "/p", ("c",), None, None, False, 0, 1, T0, T0)
    return s._replace(**changes)


# --- held.py, idle.py -----------------------------------------------------------------------------


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


# --- records.py -----------------------------------------------------------------------------------


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
    late = s._replace(late_call="planned")
    assert late.to_json() == {**d, "lateCall": "planned"}
    assert Session.from_json({**d, "lateCall": "planned"}) == late
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
    current = sess(
        holding=Place("dev", "i-1"), blocks=1, version=7, last_block="old", late_call="before"
    )
    new = sess(
        holding=None,
        interrupted=Place("dev", "i-1"),
        yielded=True,
        blocks=3,
        last_active="L",
        last_block="new",
        late_call="after",
    )
    every = frozenset(
        {"holding", "interrupted", "yielded", "blocks", "lastActive", "lastBlock", "lateCall"}
    )
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
        ("lateCall", "late_call"),
    ):
        one = SessionWrite(new, False, Place("dev", "i-1"), frozenset({name})).merge(current)
        assert one == current._replace(version=8, **{field: getattr(new, field)}), name
    with pytest.raises(StoreConflict):
        SessionWrite(new, False, None, every).merge(current)


def test_a_merge_that_finds_the_holding_changed(world: Scripted) -> None:
    key = world.new_session().key
    s = world.session(key)
    write = SessionWrite(s, False, Place("dev", "i-1"), frozenset({"holding"}))
    with pytest.raises(StoreConflict) as caught:
        write.merge(s)
    assert (caught.value.machine, caught.value.id) == ("", key)


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


def test_block_digest_keeps_lone_surrogates() -> None:
    assert block_digest("a\udcffb").startswith("3:")
    assert block_digest("a\udcffb") != block_digest("a\udcfeb")


def test_iso() -> None:
    at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    assert iso(at) == "2026-03-04T05:06:07.890123Z"
    east = at.astimezone(timezone(timedelta(hours=2)))
    assert iso(east) == "2026-03-04T05:06:07.890123Z"


def test_iso_is_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        at = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
        assert iso(at) == "2026-01-01T10:00:00.000000Z"
    finally:
        monkeypatch.undo()
        time.tzset()
