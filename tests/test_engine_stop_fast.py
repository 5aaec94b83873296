"""The stop hook's fast path (engine/stop.py `stops_yielded`, rule 4 on the machines' summary):
a stop lets a yielded session end its turn without loading the machines, but only while the
instance it yielded in is still its own and active; every other session goes to `stop`."""

from __future__ import annotations

from pathlib import Path

from helpers.engine_worlds import dev_world, enter, fire

from smllm.engine.records import Place
from smllm.engine.stop import stops_yielded


def test_stops_yielded_only_while_the_yielded_session_holds_its_instance(tmp_path: Path) -> None:
    world = dev_world(tmp_path)
    key = world.new_session().key
    enter(world, key, "GH-1")
    assert not stops_yielded(world.loaded, world.session(key), world.reader)  # not yielded
    fire(world, key, "yield")
    s, before = world.session(key), world.reader.dump()
    assert s.holding is not None and s.holding.machine == "dev"
    assert stops_yielded(world.loaded, s, world.reader)
    assert world.reader.dump() == before  # it only reads
    for other in (s._replace(holding=None), s._replace(holding=Place("dev", "i-none"))):
        assert not stops_yielded(world.loaded, other, world.reader)
    enter(world, world.new_session().key, "GH-1")  # another session takes GH-1 over
    assert not stops_yielded(world.loaded, s, world.reader)
