"""Found while writing mutation tests (issue 12 §4): the idle list in the reply of a call that
completes a paused instance at once (enter with a state whose `always` leads to a final state)
counted that instance as still paused when it lay beyond the rows `idle.paused_after` fetches
(limit + written + 1), so "…and N more" and listPaused's count were one too many until the
next call."""

from __future__ import annotations

from pathlib import Path

from helpers.engine_machines import QUICK
from helpers.engine_worlds import inst, lines, machines_world


def test_completing_an_old_paused_instance_counts_it_no_longer(tmp_path: Path) -> None:
    world = machines_world(tmp_path, QUICK)
    for n in range(1, 14):
        i = inst(id=f"i-{n:02d}", machine="quick", ref=f"J-{n}", state="A", status="paused")
        world.reader.instances[i.id] = i._replace(holder=None, updated=f"2025-01-01T00:00:{n:02d}Z")
    key = world.new_session().key
    out = world.fire(key, "enter", ("stateMachine", "quick"), ("jobId", "J-1"), ("state", "B"))
    assert out.committed.ok
    text = lines(out.committed.reply)
    # twelve are paused now, as a view right after shows
    assert "- listPaused: List all 12 paused instances." in lines(world.view(key))
    assert "…and 2 more paused: fire listPaused to list them all." in text
    assert "- listPaused: List all 12 paused instances." in text
