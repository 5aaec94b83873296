"""bench/reliability_campaign (run as bench/campaign.py), the reliability campaign of issue
11: its load run at a small size over both backends, and its checks, which must fail the run on
a violated invariant."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import reliability_campaign as campaign  # noqa: E402


def _history(versions: list[int], ref: str = "GH-1") -> tuple[dict[str, Any], list[Any]]:
    recs = [
        {
            "at": f"2026-01-01T00:00:{v:02d}.000000Z",
            "session": "sm-aaaaaa",
            "event": "enter" if i == 0 else "yield",
            "from": None if i == 0 else "PLAN",
            "to": "PLAN",
            "status": "active",
            "version": v,
        }
        for i, v in enumerate(versions)
    ]
    inst = {
        "id": "i-000001",
        "machine": "dev",
        "ref": ref,
        "state": "PLAN",
        "status": "active",
        "holder": "sm-aaaaaa",
        "version": versions[-1],
    }
    return inst, recs


def test_load_on_both_backends(pg_server: Any, tmp_path: Path) -> None:
    world = campaign.World(tmp_path)
    world.server = pg_server  # the suite's server: no second one
    v = campaign.Verdict()
    size = campaign.QUICK._replace(load_procs=3, load_fires=25, load_refs=2)
    try:
        campaign.load(world, size, v)
    finally:
        world.server = None
    assert v.violations == []


def test_a_gap_in_a_history_is_a_violation() -> None:
    inst, recs = _history([1, 2, 4])
    found = campaign.check_histories({"i-000001": inst}, {"i-000001": recs})
    assert found and "not 1..3" in found[0]
    inst, recs = _history([1, 2, 3])
    assert campaign.check_histories({"i-000001": inst}, {"i-000001": recs}) == []
    # a row that disagrees with its last record
    assert campaign.check_histories({"i-000001": {**inst, "version": 4}}, {"i-000001": recs})


def test_a_lost_update_is_a_violation() -> None:
    inst, recs = _history([1, 2, 3])
    snap = campaign.Snapshot({"i-000001": inst}, {"i-000001": recs}, [], 4)
    calls = [
        {"s": "sm-aaaaaa", "e": "enter", "r": "GH-1", "k": "ok"},
        {"s": "sm-aaaaaa", "e": "yield", "r": "GH-1", "k": "ok"},
        {"s": "sm-aaaaaa", "e": "yield", "r": "GH-1", "k": "ok"},
    ]
    assert campaign.check_calls(calls, snap) == []
    # an accepted call without its record
    assert campaign.check_calls([*calls, {**calls[1]}], snap)
    # a record without an accepted call, unless a killed call may have left it
    killed = {**calls[2], "k": "killed", "c": -9}
    assert campaign.check_calls([*calls[:2], killed], snap)
    assert campaign.check_calls([*calls[:2], killed], snap, lambda c: c["k"] == "killed") == []


def test_a_torn_row_is_a_violation() -> None:
    row = ("i-1", "dev", "GH-1", "active", None, "t", 2, json.dumps({"id": "i-1", "version": 1}))
    snap = campaign._snapshot([row], [("i-1", "{not json")], holder_column=False)
    assert len(snap.torn) >= 2


def test_a_violated_invariant_exits_non_zero(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def gapped(world: Any, size: Any, v: campaign.Verdict) -> None:
        inst, recs = _history([1, 3])
        v.extend(campaign.check_histories({"i-000001": inst}, {"i-000001": recs}), "test")

    monkeypatch.setitem(campaign.COMMANDS, "load", gapped)
    assert campaign.main(["load", "--quick", "--dir", str(tmp_path)]) == 1
    monkeypatch.setitem(campaign.COMMANDS, "load", lambda world, size, v: None)
    assert campaign.main(["load", "--quick", "--dir", str(tmp_path)]) == 0


@pytest.mark.parametrize(
    ("code", "out", "err", "kind"),
    [
        (0, "<smllm>…", "", "ok"),
        (1, "error: another session changed issue GH-1; you are in idle\n", "", "lost"),
        (
            2,
            "",
            "error: the store at 10.0.0.1:5432 is unreachable: timeout expired\n",
            "unreachable",
        ),
        (2, "", "error: internal error: KeyError: 'x'\n", "bad:traceback"),
        (2, "", "Traceback (most recent call last):\n", "bad:traceback"),
        (1, "error: something else\n", "", "bad:exit-1-unknown"),
        (2, "", "error: something else\n", "bad:exit-2-unknown"),
    ],
)
def test_replies_are_classified(code: int, out: str, err: str, kind: str) -> None:
    assert campaign.classify(code, out, err) == kind
