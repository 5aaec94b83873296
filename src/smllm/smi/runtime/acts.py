"""A turn's actions: every ACT admitted or refused through the session's ledger, the allowed
ones run concurrently, each answered by `caps.answer` (the one place an OBS's text is made)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..caps import Action, Admission, Refusal, SessionInfo, answer
from ..stream import Block, Transmission
from ..tokens import Kind
from .generate import Sink
from .types import ActionRunner, Runner

if TYPE_CHECKING:
    from .session import Session


async def act(
    session: Session, model: Transmission, sink: Sink
) -> tuple[list[Action | None], list[Refusal | None], Transmission | None]:
    """Admit, run and answer the ACTs of `model`: refusals answered at once, the rest in
    completion order; each OBS goes to `sink` as it is made."""
    acts = [b for b in model.blocks if b.kind is Kind.ACT]
    if not acts:
        return [], [], None
    rt, info = session.runtime, session.info
    actions: list[Action | None] = []
    refusals: list[Refusal | None] = []
    done: list[Block] = []
    tasks: list[asyncio.Task[Block]] = []

    def settle(obs: Block) -> None:
        done.append(obs)
        if sink is not None:
            sink(obs)

    for block in acts:
        # read, check and issue an id (the model's, or raw-N): one OBS whatever happens
        admission = session.ledger.admit(block, session.caps, rt.caps_policy, info)
        if admission.refusal is None and rt.actions is None:
            refusal = Refusal("unavailable", "this runtime runs no actions", admission.id)
            admission = Admission(admission.id, admission.action, refusal)
        actions.append(admission.action)
        refusals.append(admission.refusal)
        if admission.refusal is not None:
            settle(answer(admission))
        else:
            tasks.append(asyncio.create_task(_run(admission, rt.actions, info, rt.action_timeout)))
    try:
        for next_done in asyncio.as_completed(tasks):
            settle(await next_done)
    except BaseException:  # the turn was cancelled: its actions with it
        for task in tasks:
            task.cancel()
        raise
    return actions, refusals, Transmission(tuple(done))


async def _run(
    admission: Admission, runner: Runner | None, info: SessionInfo, timeout: float | None
) -> Block:
    """Run one admitted action; whatever happens, its one OBS."""
    assert admission.action is not None
    try:
        coro = _call(runner, admission.action, info)
        outcome: Any = await (coro if timeout is None else asyncio.wait_for(coro, timeout))
    except TimeoutError as exc:
        outcome = exc if timeout is None else TimeoutError(f"no result in {timeout} s")
    except Exception as exc:  # the runner's failure is the model's observation
        outcome = exc
    return answer(admission, outcome)


async def _call(runner: Runner | None, action: Action, info: SessionInfo) -> tuple[bool, Any]:
    if runner is None:
        raise RuntimeError("no action runner")
    result: Any
    if isinstance(runner, ActionRunner):
        result = await runner.run(action, info)
    elif asyncio.iscoroutinefunction(runner):
        result = await runner(action, info)
    else:
        result = await asyncio.to_thread(runner, action, info)  # a plain function: a thread
        if asyncio.iscoroutine(result):
            result = await result
    ok, value = result
    return bool(ok), value
