"""What a surface hands the engine (`Call`) and what the engine hands back (`Outcome`)."""

from __future__ import annotations

from ..recordclass import Record
from .records import AuditRecord, InstanceWrite, Session, SessionWrite
from .reply import Reply

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Call", "Outcome"]


class Call(Record):
    """One fired event, as a surface hands it over."""

    event: str
    params: tuple[tuple[str, Any], ...] = ()
    source: str = "agent"  # "agent" | "host"
    session: Session | None = None  # None: a keyless enter
    harness: str = "none"  # of the session a keyless enter creates
    cwd: str = ""
    configs: tuple[str, ...] = ()
    host_session: str | None = None


class Outcome(Record):
    ok: bool
    reply: Reply
    instances: tuple[InstanceWrite, ...] = ()
    session: SessionWrite | None = None
    audit: tuple[AuditRecord, ...] = ()
