"""Answering ACTs: the OBS block, the session's `Ledger` of ACT ids, and the one function
that turns an admitted ACT and its runner's outcome into its OBS (`answer`), which both the
sequential `answer_acts` and the runtime's concurrent loop use, so their texts can't drift."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from ..stream import Block, canonical_json
from ..tokens import Kind
from .check import Action, Capabilities, Policy, Refusal, SessionInfo, _short, check_act, parse_act

__all__ = [
    "Admission",
    "Ledger",
    "Outcome",
    "answer",
    "answer_acts",
    "obs_block",
    "obs_for",
]

_ABSENT: Any = object()


def obs_block(
    caused_by: str,
    ok: bool,
    content: Any = _ABSENT,
    error: Refusal | Mapping[str, str] | None = None,
) -> Block:
    """The OBS answering one ACT, exactly `{"caused_by", "ok": true, "content"}` (content
    left out when not given, as the seed's `{"caused_by":"a3","ok":true}`) or `{"caused_by",
    "ok": false, "error": {"type", "message"}}`, in canonical JSON."""
    if not isinstance(caused_by, str) or not caused_by:
        raise ValueError("an OBS is caused by an ACT id (a non-empty string)")
    value: dict[str, Any] = {"caused_by": caused_by, "ok": ok}
    if ok is True:
        if error is not None:
            raise ValueError("an ok OBS has no error")
        if content is not _ABSENT:
            value["content"] = content
    elif ok is False:
        if content is not _ABSENT:
            raise ValueError("a failed OBS has an error, not content")
        if isinstance(error, Refusal):
            error = error.error()
        if (
            not isinstance(error, Mapping)
            or set(error) != {"type", "message"}
            or not all(isinstance(v, str) for v in error.values())
        ):
            raise ValueError("a failed OBS needs an error with a string type and message")
        value["error"] = {"type": error["type"], "message": error["message"]}
    else:
        raise ValueError("ok is true or false")
    try:
        return Block(Kind.OBS, (canonical_json(value),))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the OBS content is not JSON: {exc}") from None


def obs_for(
    action: Action,
    ok: bool,
    content: Any = _ABSENT,
    error: Refusal | Mapping[str, str] | None = None,
) -> Block:
    """`obs_block` for an action (its id)."""
    if action.id is None:
        raise ValueError("the action has no id; answer with obs_block and the id the ledger gave")
    return obs_block(action.id, ok, content, error)


# -- the ledger --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Admission:
    """One ACT through the ledger: the id its OBS must name, the action (when it could be
    read) and the refusal (None: run it)."""

    id: str
    action: Action | None
    refusal: Refusal | None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


class Ledger:
    """A session's ACT ids: each issued once, answered once (`answer`), the rest `pending`."""

    def __init__(self) -> None:
        self._answered: dict[str, bool] = {}  # id -> answered, in issue order
        self._raw = 0

    @property
    def seen(self) -> Set[str]:
        return self._answered.keys()

    def issue(self, act_id: str) -> None:
        if not isinstance(act_id, str) or not act_id:
            raise ValueError("an ACT id is a non-empty string")
        if act_id in self._answered:
            raise ValueError(f"the ACT id {act_id!r} was already issued in this session")
        self._answered[act_id] = False

    def answer(self, act_id: str) -> None:
        """Record the one OBS for `act_id`; a second one, or one for an id never issued, is
        refused (ValueError)."""
        if act_id not in self._answered:
            raise ValueError(f"an OBS for {act_id!r}, which no ACT of this session has")
        if self._answered[act_id]:
            raise ValueError(f"a second OBS for {act_id!r}")
        self._answered[act_id] = True

    def pending(self) -> tuple[str, ...]:
        """Issued ids still without their OBS, in issue order."""
        return tuple(k for k, done in self._answered.items() if not done)

    def next_raw_id(self) -> str:
        """A fresh runtime-given id, `raw-N`, never one already used in the session."""
        while True:
            self._raw += 1
            candidate = f"raw-{self._raw}"
            if candidate not in self._answered:
                return candidate

    def admit(
        self,
        block: Block,
        caps: Capabilities,
        policy: Policy | None = None,
        session: SessionInfo | None = None,
    ) -> Admission:
        """Read and check one ACT block and issue its id (the model's, or `raw-N` where that
        can't be used), so it gets exactly one OBS whatever the outcome."""
        parsed = parse_act(block, raw_id=self.next_raw_id)
        refusal: Refusal | None
        if isinstance(parsed, Refusal):
            act_id, action, refusal = parsed.action_id, None, parsed
        else:
            act_id, action = parsed.id, parsed
            refusal = check_act(parsed, caps, self.seen, policy, session)
        if not act_id or act_id in self._answered:  # "" too: a malformed ACT's empty id
            act_id = self.next_raw_id()
        self.issue(act_id)
        return Admission(act_id, action, refusal)


#: what running an admitted action gave: the runner's `(ok, value)`, or the exception it raised
Outcome = tuple[bool, Any] | BaseException


def answer(admission: Admission, outcome: Outcome | None = None) -> Block:
    """The one OBS for an ACT: its refusal (`outcome` unused), or the outcome of running it.
    A runner's `(True, content)` is `ok:true`; `(False, error)` is `ok:false` with the error as
    given when it is a `Refusal` or a `{type, message}` dict, else `action_error` with the
    value as the message; a `TimeoutError` is `timeout`; any other exception `runtime_error`
    with the exception's type and message."""
    if admission.refusal is not None:
        return obs_block(admission.id, False, error=admission.refusal)
    if outcome is None:
        raise ValueError(f"ACT {admission.id} was admitted: answer it with its outcome")
    if isinstance(outcome, BaseException):
        if isinstance(outcome, TimeoutError | asyncio.TimeoutError):
            error = {"type": "timeout", "message": _short(str(outcome) or "no result in time")}
        else:
            message = _short(f"{type(outcome).__name__}: {outcome}")
            error = {"type": "runtime_error", "message": message}
        return obs_block(admission.id, False, error=error)
    ok, value = outcome
    if ok:
        return obs_block(admission.id, True, value)
    return obs_block(admission.id, False, error=_error(value))


def _error(value: Any) -> Refusal | dict[str, str]:
    """A runner's error as an OBS error: a Refusal, a {type, message} dict, or a message."""
    if isinstance(value, Refusal):
        return value
    if isinstance(value, Mapping) and set(value) == {"type", "message"}:
        return {"type": str(value["type"]), "message": str(value["message"])}
    return {"type": "action_error", "message": _short(str(value))}


def answer_acts(
    blocks: Sequence[Block],
    caps: Capabilities,
    ledger: Ledger,
    runner: Callable[[Action, SessionInfo], tuple[bool, Any]],
    policy: Policy | None = None,
    session: SessionInfo | None = None,
) -> list[Block]:
    """One OBS per ACT block, in ACT order: a plain sequential reference of the runtime's
    concurrent loop (the same `admit` and `answer`, so the same texts). Refused actions never
    reach `runner`, which is called as the runtime calls it: `runner(action, session)` ->
    `(ok, content | error)`."""
    who = session or SessionInfo("", caps)
    answers = []
    for block in blocks:
        admission = ledger.admit(block, caps, policy, who)
        outcome: Outcome | None = None
        if admission.refusal is None:
            assert admission.action is not None
            try:
                outcome = runner(admission.action, who)
            except Exception as exc:  # the runner's failure is the model's observation
                outcome = exc
        obs = answer(admission, outcome)
        ledger.answer(admission.id)
        answers.append(obs)
    return answers
