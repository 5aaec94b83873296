"""Records the engine reads and the writes it returns (engine.md §2, §3, §11).

Records are immutable NamedTuples; the store turns them into rows and back. Times are UTC
ISO-8601 strings with microseconds (`2026-12-02T14:44:41.123456Z`): they sort as text.
"""

from __future__ import annotations

from ..errors import StoreConflict
from ..recordclass import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

__all__ = [
    "ACTIVE",
    "COMPLETED",
    "INTERRUPTED",
    "PAUSED",
    "AuditRecord",
    "HistoryRecord",
    "Instance",
    "InstanceWrite",
    "Place",
    "Session",
    "SessionWrite",
    "iso",
    "minute",
]

ACTIVE, INTERRUPTED, PAUSED, COMPLETED = "active", "interrupted", "paused", "completed"


class Place(Record):
    """`{machine, id}`: which instance a session holds or keeps in its interrupted slot."""

    machine: str
    id: str


class Instance(Record):
    id: str
    machine: str
    ref: str | None
    state: str
    status: str
    holder: str | None
    holder_seen: str | None
    version: int
    visits: dict[str, int]
    resume_state: str | None
    created: str
    updated: str

    @property
    def label(self) -> str:
        return self.ref if self.ref is not None else self.id

    @property
    def place(self) -> Place:
        return Place(self.machine, self.id)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "machine": self.machine,
            "ref": self.ref,
            "state": self.state,
            "status": self.status,
            "holder": self.holder,
            "holderSeen": self.holder_seen,
            "version": self.version,
            "visits": self.visits,
            "resumeState": self.resume_state,
            "created": self.created,
            "updated": self.updated,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Instance:
        return cls(
            d["id"],
            d["machine"],
            d["ref"],
            d["state"],
            d["status"],
            d["holder"],
            d["holderSeen"],
            d["version"],
            dict(d["visits"]),
            d["resumeState"],
            d["created"],
            d["updated"],
        )


class Session(Record):
    key: str
    harness: str
    host_session: str | None
    cwd: str
    configs: tuple[str, ...]
    holding: Place | None
    interrupted: Place | None
    yielded: bool
    blocks: int
    version: int
    created: str
    last_active: str

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "harness": self.harness,
            "hostSession": self.host_session,
            "cwd": self.cwd,
            "configs": list(self.configs),
            "holding": _place_json(self.holding),
            "interrupted": _place_json(self.interrupted),
            "yielded": self.yielded,
            "blocks": self.blocks,
            "version": self.version,
            "created": self.created,
            "lastActive": self.last_active,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Session:
        return cls(
            d["key"],
            d["harness"],
            d["hostSession"],
            d["cwd"],
            tuple(d["configs"]),
            _place(d["holding"]),
            _place(d["interrupted"]),
            d["yielded"],
            d["blocks"],
            d["version"],
            d["created"],
            d["lastActive"],
        )


def _place_json(p: Place | None) -> dict[str, str] | None:
    return None if p is None else {"machine": p.machine, "id": p.id}


def _place(d: dict[str, str] | None) -> Place | None:
    return None if d is None else Place(d["machine"], d["id"])


class HistoryRecord(Record):
    at: str
    session: str
    source: str
    event: str
    params: dict[str, Any]
    from_state: str | None
    to_state: str
    arrival: str | None
    status: str
    version: int
    trace: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "session": self.session,
            "source": self.source,
            "event": self.event,
            "params": self.params,
            "from": self.from_state,
            "to": self.to_state,
            "arrival": self.arrival,
            "status": self.status,
            "version": self.version,
            "trace": list(self.trace),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HistoryRecord:
        return cls(
            d["at"],
            d["session"],
            d["source"],
            d["event"],
            d["params"],
            d["from"],
            d["to"],
            d["arrival"],
            d["status"],
            d["version"],
            tuple(d["trace"]),
        )


class AuditRecord(Record):
    at: str
    kind: str  # bind | event | block | runaway | moved | prompt
    detail: dict[str, Any]


class InstanceWrite(Record):
    """Write `instance` if the stored version is still `expected` (0: a new instance)."""

    instance: Instance
    expected: int
    history: HistoryRecord


class SessionWrite(Record):
    """Apply `changes` to the session as stored at commit time, or create `session`.

    The commit fails like an instance conflict when the stored `holding` is no longer
    `expected_holding` (engine.md §10: a hook's change made meanwhile is not undone).
    """

    session: Session
    create: bool
    expected_holding: Place | None
    changes: frozenset[str]  # the fields of `session` this write sets

    def merge(self, current: Session) -> Session:
        """The session to store in place of `current` (its stored version): `changes` applied
        to it, version + 1. StoreConflict when its `holding` is not `expected_holding`."""
        if current.holding != self.expected_holding:
            raise StoreConflict("", current.key)
        new, changes = self.session, self.changes
        return current._replace(
            version=current.version + 1,
            holding=new.holding if "holding" in changes else current.holding,
            interrupted=new.interrupted if "interrupted" in changes else current.interrupted,
            yielded=new.yielded if "yielded" in changes else current.yielded,
            blocks=new.blocks if "blocks" in changes else current.blocks,
            last_active=new.last_active if "lastActive" in changes else current.last_active,
        )


def iso(now: datetime) -> str:
    from datetime import UTC  # datetime loads only on the write path

    return str(now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def minute(at: str) -> str:
    """`YYYY-MM-DD HH:MM UTC` of a stored time."""
    return f"{at[:10]} {at[11:16]} UTC"
