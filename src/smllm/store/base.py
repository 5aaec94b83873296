"""The store interface: what a backend (SQLite, PostgreSQL) must offer (engine.md §10).

Two roles: an `InstanceStore` per config (instances, the ref index, history) and the user's
`SessionStore` (sessions, bindings, audit). A backend may serve both from one database.

Post-state on error, for every `commit_*`: nothing of that commit is written.
"""

from __future__ import annotations

from ..engine.records import (
    AuditRecord,
    HistoryRecord,
    Instance,
    InstanceWrite,
    Session,
    SessionWrite,
)
from ..errors import RefTaken, StoreBusy, StoreConflict, StoreError, StoreTooNew
from ..jsontext import loads as _json_loads
from ..recordclass import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Protocol
else:
    Protocol = object  # the protocols only type-check; nothing isinstance-checks them

__all__ = [
    "InstanceStore",
    "RefTaken",
    "SavedRow",
    "SessionStore",
    "StoreBusy",
    "StoreConflict",
    "StoreDump",
    "StoreError",
    "StoreTooNew",
    "first_instance",
    "paused_found",
    "read_instance",
    "readable",
    "saved_rows",
]


class SavedRow(Record):
    """One instance row as `validate` reads it: the instance, or why it can't be read."""

    id: str
    machine: str
    instance: Instance | None
    problem: str | None


class StoreDump(Record):
    """Every instance row and history record of one store (one namespace of a PostgreSQL
    database), as stored: what `smllm store migrate` moves. Records are copied as text, so an
    unreadable one (INS-4) moves as it is instead of stopping the move."""

    #: (id, machine, ref, status, updated, version, data), in id order
    instances: tuple[tuple[str, str, str | None, str, str, int, str], ...]
    #: (instance id, data), in commit order
    history: tuple[tuple[str, str], ...]


#: Instance JSON keys → the types a value may have (None: null allowed)
_FIELDS: dict[str, tuple[type | None, ...]] = {
    "id": (str,),
    "machine": (str,),
    "ref": (str, None),
    "state": (str,),
    "status": (str,),
    "holder": (str, None),
    "holderSeen": (str, None),
    "version": (int,),
    "visits": (dict,),
    "resumeState": (str, None),
    "created": (str,),
    "updated": (str,),
}
_STATUSES = ("active", "interrupted", "paused", "completed")


def read_instance(text: str) -> Instance:
    """An instance record checked field by field; ValueError names the first problem."""
    try:
        data = _json_loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    for key, types in _FIELDS.items():
        if key not in data:
            raise ValueError(f"missing {key}")
        value = data[key]
        ok = (value is None and None in types) or any(
            t is not None and isinstance(value, t) and not isinstance(value, bool) for t in types
        )
        if not ok:
            raise ValueError(f"{key} has the wrong type")
    extra = [k for k in data if k not in _FIELDS]
    if extra:
        raise ValueError(f"unknown field {extra[0]} (written by a newer smllm?)")
    if data["status"] not in _STATUSES:
        raise ValueError(f"unknown status {data['status']} (written by a newer smllm?)")
    visits = data["visits"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in visits.values()):
        raise ValueError("visits must count with integers")
    return Instance.from_json(data)


def first_instance(name: str, rows: Sequence[Sequence[Any]]) -> Instance | None:
    """The instance of the first row's record (a lookup by id or ref); one that can't be read
    is the store's error, naming it."""
    if not rows:
        return None
    try:
        return read_instance(rows[0][0])
    except ValueError as exc:
        raise StoreError(f"{name}: a saved instance can't be read ({exc})") from None


def readable(rows: Sequence[Sequence[Any]]) -> list[Instance]:
    """The rows' instances; a damaged record is left out (validate reports it: INS-4), so one
    bad row never blocks the idle list or the agent's stop."""
    out = []
    for row in rows:
        try:
            out.append(read_instance(row[0]))
        except ValueError:
            continue
    return out


def paused_found(rows: Sequence[Sequence[Any]], total: int) -> tuple[list[Instance], int]:
    """A paused page's readable instances and the count of all paused ones (`total`, from the
    query), less the damaged rows of this page that `readable` left out."""
    found = readable(rows)
    return found, total - (len(rows) - len(found))


def saved_rows(rows: Sequence[Sequence[Any]]) -> list[SavedRow]:
    """(id, machine, record) rows, each read on its own: validate's INS rules."""
    out = []
    for id, machine, data in rows:
        try:
            out.append(SavedRow(id, machine, read_instance(data), None))
        except ValueError as exc:
            out.append(SavedRow(id, machine, None, str(exc)))
    return out


class InstanceStore(Protocol):
    name: str

    def instance(self, machine: str, id: str) -> Instance | None: ...

    def find(self, machine: str, id_or_ref: str) -> Instance | None: ...

    def taken(self, machine: str, value: str) -> bool: ...

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]: ...

    def instances(
        self, machines: Sequence[str] | None, statuses: Sequence[str] | None
    ) -> list[Instance]:
        """Instances, most recently updated first."""

    def history(self, machine: str, id: str) -> list[HistoryRecord]: ...

    def held_by(self, key: str) -> list[Instance]:
        """The `active` and `interrupted` instances whose holder is `key`, most recently
        updated first (a session an interrupted call left behind, engine/recover.py)."""

    def commit_instances(self, writes: Sequence[InstanceWrite]) -> None:
        """All or nothing; StoreConflict on a stale version, RefTaken on a taken ref."""

    def close(self) -> None: ...

    def saved(self) -> list[SavedRow]:
        """Every instance row, each read on its own, in id order (validate's INS rules)."""

    def dump(self) -> StoreDump:
        """Every row, read in one transaction (a consistent snapshot)."""

    def load(self, dump: StoreDump, unchanged: Callable[[], bool]) -> None:
        """Insert every row of `dump` in one transaction, committed only if `unchanged()` still
        holds just before the commit; RefTaken where an id or ref is taken, StoreConflict where
        `unchanged()` fails: then nothing is written."""

    def discard(self, dump: StoreDump) -> bool:
        """Delete the rows of `dump` (moved elsewhere), in one transaction, only if the store
        still holds exactly them; False (and nothing deleted) if it changed since."""


class SessionStore(Protocol):
    name: str

    def session(self, key: str) -> Session | None: ...

    def key_taken(self, key: str) -> bool: ...

    def binding(self, harness: str, host_session: str) -> Session | None: ...

    def bind(self, session: Session, audit: Sequence[AuditRecord]) -> Session:
        """Create `session` bound to its (harness, hostSession), or return the session already
        bound there (two concurrent binds yield one session)."""

    def sessions(self) -> list[Session]:
        """Most recently active first."""

    def audit(self, key: str) -> list[AuditRecord]: ...

    def append_audit(self, key: str, audit: Sequence[AuditRecord]) -> None:
        """Append audit records of a session without writing the session."""

    def commit_session(self, write: SessionWrite, audit: Sequence[AuditRecord]) -> Session:
        """Apply the write to the session as stored; StoreConflict if its holding changed."""
