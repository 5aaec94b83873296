"""A turn consumed as it is generated (`Session.stream`): the parser's events come while the
model still generates, each OBS as its action completes, the `TurnResult` last, the same
turn as `Session.turn`; a consumer that walks away early leaves no session waiting for ever."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest
from helpers.smi_runtime import Recorder, act_ids, first, read, run, runtime, toy

from smllm.smi.backends.scripted import ScriptedBackend, ScriptedState
from smllm.smi.parser import BlockStart, EndOfTransmission, PayloadText
from smllm.smi.runtime import TurnResult
from smllm.smi.stream import Block, SmiError, Transmission
from smllm.smi.tokens import Kind


class Gated(ScriptedBackend):
    """Says "abcdefgh" in OUT, but its feed of the 4th generated id waits for `gate`."""

    def __init__(self) -> None:
        t = toy()
        script = [t.ids[Kind.OUT], *(t.enc(c)[0] for c in "abcdefgh"), t.ids[Kind.EOT]]
        super().__init__(t.vocab, script)
        self.gate = threading.Event()
        self.fed = 0

    def feed(self, state: ScriptedState, ids: Any) -> Any:
        if len(ids) == 1 and state.generated == 3:
            assert self.gate.wait(10), "the test never opened the gate"
        self.fed += len(ids) == 1
        return super().feed(state, ids)


def test_events_arrive_while_the_model_still_generates() -> None:
    backend = Gated()
    session = runtime(backend).session()

    async def go() -> tuple[list[object], list[object]]:
        before, after = [], []
        async for item in session.stream(first()):
            if not backend.gate.is_set():
                before.append(item)
                if len([e for e in before if isinstance(e, PayloadText)]) == 2:
                    backend.gate.set()  # generation was blocked until now
            else:
                after.append(item)
        return before, after

    before, after = run(go())
    assert before[0] == BlockStart(Kind.OUT)
    assert "".join(e.text for e in before if isinstance(e, PayloadText)) == "ab"
    assert isinstance(after[-1], TurnResult)
    assert after[-1].model.blocks[0].text == "abcdefgh"
    assert isinstance(after[-2], EndOfTransmission)


def test_the_stream_is_the_turn_and_obs_come_as_actions_complete() -> None:
    t = toy()
    script = act_ids(t, read("a1", "slow.py"), read("a2", "fast.py"), read("a3", "x"))

    def make() -> Any:
        runner = Recorder({"slow.py": 0.4, "fast.py": 0.05})
        backend = ScriptedBackend(t.vocab, script, then=t.ids[Kind.EOT])
        return runtime(backend, actions=runner, caps_policy=no_x)

    async def go() -> list[tuple[float, object]]:
        start = time.monotonic()
        session = make().session()
        return [(time.monotonic() - start, item) async for item in session.stream(first())]

    timed = run(go())
    items = [item for _, item in timed]
    result = items[-1]
    assert isinstance(result, TurnResult)
    obs = [(at, item) for at, item in timed if isinstance(item, Block)]
    events = [item for item in items[:-1] if not isinstance(item, Block)]
    assert events == list(result.events)  # the same events, in the same order
    assert [b for _, b in obs] == list(result.obs.blocks)  # type: ignore[union-attr]
    causes = [b.text.split('"')[3] for _, b in obs]
    assert causes == ["a3", "a2", "a1"]  # the refusal at once, then completion order
    assert obs[2][0] - obs[1][0] > 0.25  # the fast OBS came well before the slow one
    assert items.index(obs[0][1]) > max(items.index(e) for e in events)
    # `turn` takes the same path: the same result
    same = run(make().session().turn(first()))
    assert same.generated == result.generated and same.events == result.events


def no_x(action: Any, session: Any) -> Any:
    from smllm.smi.caps import Refusal

    return Refusal("policy_denied", "not x") if action.arguments["path"] == "x" else None


def test_walking_away_early_ends_the_turn_and_frees_the_runtime() -> None:
    backend = Gated()
    rt = runtime(backend)
    session = rt.session()

    async def go() -> None:
        async for item in session.stream(first()):
            assert item == BlockStart(Kind.OUT)
            break  # the generation thread is still waiting at the gate
        backend.gate.set()
        for _ in range(200):
            if not session._busy:
                break
            await asyncio.sleep(0.01)

    run(go())
    assert session.failed == "the caller abandoned the turn's stream before its end"
    assert backend.fed < 9  # generation stopped at the next id, not at the end
    with pytest.raises(RuntimeError, match="start a new session"):
        run(session.turn(first()))
    other = run(rt.session().turn(first()))  # the runtime's lock is free again
    assert other.model.blocks[0].text == "abcdefgh"

    gated = Gated()
    again = runtime(gated).session()

    async def closed() -> None:
        async with contextlib.aclosing(again.stream(first())) as items:
            async for _ in items:
                break
        assert not again._busy  # closed at once: the turn is over for the session

    run(closed())
    gated.gate.set()
    assert again.failed == "the caller abandoned the turn's stream before its end"


def test_an_error_of_the_turn_comes_out_of_the_iterator() -> None:
    session = runtime(Gated()).session()

    async def go() -> list[object]:
        model_side = Transmission.of([Block.of("out", "hi")])
        return [item async for item in session.stream(model_side)]

    with pytest.raises(SmiError, match="runtime transmission"):
        run(go())
    assert session.failed is None  # refused before anything was fed
