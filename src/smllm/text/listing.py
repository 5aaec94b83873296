"""The text of `session list`, `session show --audit` and `instance list|show`
(cli-and-harnesses.md §2). Every value from outside (a ref, a state, a param, a trace line)
is one line: line breaks shown as `\\n`, as blocks show them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.records import (
    ACTIVE,
    INTERRUPTED,
    AuditRecord,
    HistoryRecord,
    Instance,
    Session,
    minute,
)
from ..recordclass import Record
from .escape import escape

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


__all__ = [
    "InstanceDetail",
    "SessionLine",
    "audit_text",
    "instance_table",
    "instance_text",
    "left_as",
    "moved_to",
    "session_table",
    "table",
]


def moved_to(session: Session, inst: Instance | None) -> str | None:
    """The other session that holds INST now, when one took it over from SESSION (engine.md
    §5.1); SESSION learns it on its next call (§7.1). None when INST is gone or not held by
    another session."""
    if inst is None or inst.holder is None or inst.holder == session.key:
        return None
    return inst.holder


def left_as(session: Session, inst: Instance | None, status: str) -> str | None:
    """INST's status when it left SESSION by it, not by a takeover: paused or completed by
    the session that took it over (engine.md §7.1: `KIND LABEL is STATUS`); STATUS is the
    status the place expects (active for the held instance, interrupted for the slot)."""
    if inst is None or moved_to(session, inst) is not None or inst.status == status:
        return None
    return inst.status


class SessionLine(Record):
    """A session, and where it is: the instances it holds and keeps interrupted (None when
    that instance is gone or its store can't be read) and the kind of the held one.

    An instance may have left the session since it last called (engine.md §7.1): another
    session took it over (`movedTo`, the text's `(moved to session KEY)`), or that session
    paused or completed it (`status`, the text's `(now STATUS)`). The session's next call
    returns it to idle with the same finding."""

    session: Session
    held: Instance | None
    slot: Instance | None
    kind: str | None
    problem: str | None  # why its instances couldn't be read (a broken store), else None

    def to_json(self) -> dict[str, Any]:
        s = self.session
        d = s.to_json()
        for name, place, inst, status in (
            ("holding", s.holding, self.held, ACTIVE),
            ("interrupted", s.interrupted, self.slot, INTERRUPTED),
        ):
            if place is None:
                continue
            d[name] = {
                "machine": place.machine,
                "id": place.id,
                "label": inst.label if inst else None,
                "state": inst.state if inst else None,
            }
            moved, left = moved_to(s, inst), left_as(s, inst, status)
            if moved is not None:
                d[name]["movedTo"] = moved
            if left is not None:
                d[name]["status"] = left
        if self.held is None and self.problem is None:
            d["holding"] = None  # an instance that left reads as idle, as the text says
        return d


class InstanceDetail(Record):
    instance: Instance
    kind: str
    history: list[HistoryRecord]


def table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to the widest entry plus two spaces; the last column unpadded."""
    if not rows:
        return ""
    cells = [[escape(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]) - 1)]
    lines = [
        "".join(c.ljust(w + 2) for c, w in zip(r, widths, strict=False)) + r[-1] for r in cells
    ]
    return "\n".join(lines) + "\n"


def where(line: SessionLine) -> str:
    """`idle`, `MACHINE › STATE · KIND LABEL`, or `?` when its store can't be read; an
    instance that left the session since its last call is followed by
    `(moved to session KEY)` or `(now STATUS)` (SessionLine)."""
    if line.problem is not None:
        return "?"
    held = line.held
    if held is None:
        return "idle"
    text = f"{held.machine} › {held.state} · {line.kind} {held.label}"
    moved, left = moved_to(line.session, held), left_as(line.session, held, ACTIVE)
    if moved is not None:
        return f"{text} (moved to session {moved})"
    if left is not None:
        return f"{text} (now {left})"
    return text


def session_table(lines: Sequence[SessionLine]) -> str:
    return table(
        [
            [
                line.session.key,
                where(line),
                line.session.harness,
                minute(line.session.last_active),
                line.session.cwd,
            ]
            for line in lines
        ]
    )


def instance_table(found: Sequence[Instance]) -> str:
    return table(
        [[i.machine, i.label, i.state, i.status, i.holder or "-", minute(i.updated)] for i in found]
    )


def _audit_detail(kind: str, detail: dict[str, Any]) -> str:
    if kind == "bind":
        return f"{detail.get('harness')} {detail.get('cwd')}"
    if kind == "event":
        by = " (host)" if detail.get("source") == "host" else ""
        committed = detail.get("committed")
        took = f" (committed {committed[11:19]} UTC)" if isinstance(committed, str) else ""
        return (
            f"{detail.get('event')}{by} {detail.get('machine')} {detail.get('label')} "
            f"{detail.get('from') or '-'} → {detail.get('to')}{took}"
        )
    if kind in ("block", "runaway"):
        fields = ("machine", "state", "kind", "label")
        return " ".join(str(detail.get(name)) for name in fields)
    if kind == "moved":
        return str(detail.get("message"))
    if kind == "prompt" and isinstance(detail.get("cleared"), dict):
        was = detail["cleared"]
        cleared = [*(["yield"] if was.get("yielded") else []), f"{was.get('blocks')} blocks"]
        return (
            f"yielded={detail.get('yielded')}, blocks={detail.get('blocks')} "
            f"(cleared {' and '.join(cleared)})"
        )
    return ", ".join(f"{k}={v}" for k, v in detail.items())


def audit_text(records: Sequence[AuditRecord]) -> str:
    return "".join(
        f"{a.at[:10]} {a.at[11:19]} UTC  {a.kind}  {escape(_audit_detail(a.kind, a.detail))}\n"
        for a in records
    )


def instance_text(detail: InstanceDetail) -> str:
    from ..jsontext import dumps

    inst = detail.instance
    out = [
        f"{inst.machine} {detail.kind} {escape(inst.label)} ({inst.id})",
        f"state: {inst.state}  status: {inst.status}  holder: {inst.holder or '-'}  "
        f"version: {inst.version}",
        "visits: " + ", ".join(f"{k} {v}" for k, v in inst.visits.items()),
        f"created: {minute(inst.created)}  updated: {minute(inst.updated)}",
        "history:",
    ]
    for h in detail.history:
        out.append(
            f"  {h.at[:10]} {h.at[11:19]} UTC  {h.event} ({h.source}, {h.session})  "
            f"{h.from_state or '-'} → {h.to_state}  {h.status} v{h.version}"
        )
        if h.arrival:
            out.append(f"    Arrived by: {escape(h.arrival)}")
        if h.params:
            out.append("    Params: " + escape(dumps(h.params, (", ", ": "))))
        out.extend(f"    {escape(line)}" for line in h.trace)
    return "\n".join(out) + "\n"
