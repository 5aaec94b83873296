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
    "block_digest",
    "iso",
    "minute",
    "repeats_block",
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
    #: `block_digest` of the text of the session's last blocked stop (engine.md §9), or None;
    #: stored only when set, so sessions written before it existed load unchanged
    last_block: str | None = None
    #: the event of a call the engine carried out after the client had stopped waiting for
    #: its reply (an MCP cancel, a closed pipe): the session's next reply says so, once
    late_call: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
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
        if self.last_block is not None:
            d["lastBlock"] = self.last_block
        if self.late_call is not None:
            d["lateCall"] = self.late_call
        return d

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
            d.get("lastBlock"),
            d.get("lateCall"),
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
            last_block=new.last_block if "lastBlock" in changes else current.last_block,
            late_call=new.late_call if "lateCall" in changes else current.late_call,
        )


def _normal(text: str) -> str:
    """A block's text as a harness may pass it back: line breaks as `\\n`, no outer spaces."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def _sha256(data: bytes) -> str:
    try:  # the builtin module: `hashlib` loads OpenSSL, ~5 ms of a hook call
        from _sha256 import sha256 as make  # type: ignore[import-not-found, no-redef, unused-ignore]
    except ImportError:  # pragma: no cover - Python 3.12 renamed it; others may lack both
        try:
            from _sha2 import sha256 as make  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            from hashlib import sha256 as make  # type: ignore[no-redef, unused-ignore]
    return str(make(data).hexdigest())


def block_digest(text: str) -> str:
    """`LENGTH:SHA256` of a blocked stop's text (normalised: `\\r\\n` as `\\n`, stripped), the
    length in characters: what a session keeps of its last block (engine.md §9)."""
    text = _normal(text)
    return f"{len(text)}:{_sha256(text.encode('utf-8', 'surrogatepass'))}"


def repeats_block(digest: str, prompt: str) -> bool:
    """Whether `prompt` is the text of the block `digest` was made of, as a harness continuing
    after that block sends it: the text itself, or the text at the end of the prompt after
    something the harness put before it (Copilot's model sees
    `<current_datetime>…</current_datetime>\\n\\nREASON`; its hook gets REASON alone)."""
    length, _, _ = digest.partition(":")
    if not (length.isascii() and length.isdigit()):
        return False
    n = int(length)
    prompt = _normal(prompt)
    if n == 0 or len(prompt) < n:
        return False
    return block_digest(prompt[len(prompt) - n :]) == digest


def iso(now: datetime) -> str:
    from ..clock import UTC  # loads only on the write path

    return str(now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def minute(at: str) -> str:
    """`YYYY-MM-DD HH:MM UTC` of a stored time."""
    return f"{at[:10]} {at[11:16]} UTC"
