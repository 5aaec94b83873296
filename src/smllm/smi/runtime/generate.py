"""A turn's generation: the token loop under the budget (and the turn's constraint), or the
replay that checks a backend which ran the loop itself."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..budget import BudgetProcessor, Phase
from ..parser import EndOfTransmission
from ..stream import SmiError, Transmission
from ..tokens import Kind
from .types import Bounded, ContextFull, GeneratesTurns, TurnConstraint

if TYPE_CHECKING:
    from .session import Session

#: what a streaming turn hands each event to (None: nobody streams)
Sink = Callable[[object], None] | None
#: the fewest ids a model transmission needs: a block id, and the `<|eot|>` the runtime may
#: insert itself
MIN_ANSWER = 2


class Abandoned(Exception):
    """The caller stopped consuming the turn's stream: generation stops at the next id."""


@dataclass
class Generated:
    model: Transmission
    ids: list[int]
    events: list[object]
    truncation: str | None


def room_left(session: Session, prompt: Sequence[int]) -> int | None:
    """The ids the model may generate after `prompt` (its `<|eot|>` kept back), None without
    a bound; refuses the turn (ContextFull) when fewer than `MIN_ANSWER` fit."""
    backend = session.runtime.backend
    room = backend.room(session.state) if isinstance(backend, Bounded) else None
    if room is None:
        return None
    left = room - len(prompt)
    if left < MIN_ANSWER:
        raise ContextFull(
            f"the model's context is full: this turn needs {len(prompt)} ids for the "
            f"transmission and {MIN_ANSWER} for the shortest answer, and the session has room "
            f"for {max(room, 0)} more; send a shorter transmission or start a new session",
            max(room, 0),
        )
    return left - 1  # the last position is kept for the <|eot|> the runtime may insert


def generate(
    session: Session, prompt: list[int], room: int | None, sink: Sink, stop: threading.Event
) -> Generated:
    """Feed `prompt`, generate the model's transmission (at most `max_new_tokens` ids and
    `room`), end it with `<|eot|>` if the model didn't, and parse it; each parser event goes
    to `sink` as it comes."""
    rt = session.runtime
    eot = rt.ids[Kind.EOT]
    backend, budget, sampler, rng = rt.backend, session._budget, rt.sampler, session.rng
    budget.reset(session.reasoning)
    limit = rt.max_new_tokens if room is None else min(rt.max_new_tokens, room)
    constraint = rt.constraint(session) if rt.constraint is not None else None
    parser = rt.parser_factory(session.reasoning)
    ids: list[int] = []
    events: list[object] = []

    def parse(token_ids: int | list[int]) -> None:
        new = parser.feed(token_ids)
        events.extend(new)
        if sink is not None:
            for event in new:
                sink(event)

    if isinstance(backend, GeneratesTurns):
        extra: dict[str, Any] = {} if constraint is None else {"constraint": constraint}
        made = backend.generate_turn(session.state, prompt, budget, sampler, rng, limit, **extra)
        ids = [int(i) for i in made]
        verify(session, ids, limit)
        parse(ids)
    else:
        logits = backend.feed(session.state, prompt)
        for _ in range(limit):
            if stop.is_set():
                raise Abandoned("the caller abandoned the turn's stream")
            masked = budget.apply(logits)
            if constraint is not None:
                masked = constraint.apply(masked)
            token = sampler.pick(masked, rng)
            budget.observe(token)
            if constraint is not None:
                constraint.observe(token)
            ids.append(token)
            parse(token)
            logits = backend.feed(session.state, [token])
            if token == eot:
                break
    truncation = None
    if not ids or ids[-1] != eot:  # the runtime ends the transmission: trusted code inserts it
        if room is not None and len(ids) >= room:
            truncation = (
                f"the model's context is full: {len(ids)} ids generated and room for no more "
                "but the <|eot|> the runtime inserted; start a new session to go on"
            )
        else:
            truncation = (
                f"max_new_tokens: {len(ids)} ids generated without <|eot|>; the runtime inserted it"
            )
        ids.append(eot)
        parse(eot)
        backend.feed(session.state, [eot])
    ends = [e for e in events if isinstance(e, EndOfTransmission)]
    if len(ends) != 1:
        raise SmiError(f"the model's transmission parsed into {len(ends)} transmissions")
    return Generated(ends[0].transmission, ids, events, truncation)


def verify(session: Session, ids: list[int], limit: int) -> None:
    """A backend that ran the loop itself is checked, not trusted: its ids are replayed
    through a fresh budget and a fresh constraint (the seed: the runtime MUST enforce the
    limits)."""
    rt = session.runtime
    if len(ids) > limit:
        raise SmiError(f"the backend generated {len(ids)} ids (at most {limit} this turn)")
    replay = BudgetProcessor(
        rt.ids, session.reasoning, extra_forbidden=rt.forbid, characters=rt.characters
    )
    constraint: TurnConstraint | None = (
        rt.constraint(session) if rt.constraint is not None else None
    )
    for n, token in enumerate(ids):
        if replay.phase is Phase.DONE:
            raise SmiError(f"the backend generated ids after <|eot|> (id {n})")
        if not replay.allows(token):
            raise SmiError(f"the backend generated id {token} where the budget forbids it (id {n})")
        if constraint is not None and not constraint.allows(token):
            raise SmiError(
                f"the backend generated id {token} where the turn's grammar forbids it (id {n})"
            )
        replay.observe(token)
        if constraint is not None:
            constraint.observe(token)
