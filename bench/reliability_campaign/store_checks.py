"""A store read straight from its tables (no smllm), and the campaign's invariants checked on
what was read: the histories, and the history against the calls that were made."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .common import Call, Project, Record


class Snapshot(NamedTuple):
    instances: dict[str, Record]
    history: dict[str, list[Record]]
    torn: list[str]  # rows whose JSON doesn't parse or disagrees with its columns
    rows: int  # instance and history rows read

    @property
    def records(self) -> int:
        return sum(len(h) for h in self.history.values())

    def ref_of(self, instance_id: str) -> str:
        inst = self.instances.get(instance_id)
        return str(inst["ref"]) if inst else "?"


def _snapshot(
    inst_rows: list[tuple[Any, ...]], hist_rows: list[tuple[str, str]], holder_column: bool
) -> Snapshot:
    instances: dict[str, Record] = {}
    history: dict[str, list[Record]] = {}
    torn: list[str] = []
    for id_, machine, ref, status, holder, updated, version, data in inst_rows:
        try:
            d = json.loads(data)
        except ValueError as exc:
            torn.append(f"instance {id_}: its JSON doesn't parse ({exc})")
            continue
        columns = {
            "id": id_,
            "machine": machine,
            "ref": ref,
            "status": status,
            "updated": updated,
            "version": version,
        }
        if holder_column:
            columns["holder"] = holder
        for k, v in columns.items():
            if d.get(k) != v:
                torn.append(f"instance {id_}: column {k}={v!r} but its JSON says {d.get(k)!r}")
        instances[id_] = d
        history[id_] = []
    for instance, data in hist_rows:
        try:
            rec = json.loads(data)
        except ValueError as exc:
            torn.append(f"a history record of {instance} doesn't parse ({exc})")
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("version"), int):
            torn.append(f"a history record of {instance} isn't one: {data[:100]}")
            continue
        history.setdefault(instance, []).append(rec)
    return Snapshot(instances, history, torn, len(inst_rows) + len(hist_rows))


def sqlite_db(p: Project) -> Path:
    return p.folder / ".smllm" / "state" / "smllm.db"


def read_store(p: Project) -> Snapshot:
    """Every instance and history record of P's store (its namespace, on PostgreSQL)."""
    if p.backend == "sqlite":
        db = sqlite_db(p)
        if not db.exists():
            return Snapshot({}, {}, [], 0)
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            check = conn.execute("PRAGMA integrity_check").fetchall()
            if check != [("ok",)]:
                return Snapshot({}, {}, [f"integrity_check: {check[:3]}"], 0)
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                return Snapshot({}, {}, [], 0)
            inst = conn.execute(
                "SELECT id, machine, ref, status, NULL, updated, version, data FROM instances"
            ).fetchall()
            hist = conn.execute("SELECT instance, data FROM history ORDER BY seq").fetchall()
        finally:
            conn.close()
        return _snapshot(inst, hist, holder_column=False)
    import psycopg

    with psycopg.connect(p.url, connect_timeout=10) as conn:
        if conn.execute("SELECT to_regclass('smllm.instances')").fetchone() == (None,):
            return Snapshot({}, {}, [], 0)
        inst = conn.execute(
            "SELECT id, machine, ref, status, holder, updated, version, data FROM smllm.instances "
            "WHERE namespace = %s",
            (p.namespace,),
        ).fetchall()
        hist = conn.execute(
            "SELECT instance, data FROM smllm.history WHERE namespace = %s ORDER BY seq",
            (p.namespace,),
        ).fetchall()
    return _snapshot(inst, hist, holder_column=True)


def read_sessions(p: Project) -> tuple[int, list[str]]:
    """The sessions of P's user store: how many, and the torn ones."""
    db = Path(p.env["XDG_STATE_HOME"]) / "smllm" / "user.db"
    if not db.exists():
        return 0, []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    torn = []
    try:
        rows = conn.execute("SELECT key, data FROM sessions").fetchall()
        for key, data in rows:
            try:
                if json.loads(data).get("key") != key:
                    torn.append(f"session {key}: its JSON names another key")
            except ValueError as exc:
                torn.append(f"session {key}: its JSON doesn't parse ({exc})")
        for (data,) in conn.execute("SELECT data FROM audit"):
            try:
                json.loads(data)
            except ValueError as exc:
                torn.append(f"an audit record doesn't parse ({exc})")
    finally:
        conn.close()
    return len(rows), torn


# -- the checks -----------------------------------------------------------------------------------


def check_histories(instances: dict[str, Record], history: dict[str, list[Record]]) -> list[str]:
    """engine.md §10 on the records: versions 1..V without a gap, the instance at V and as its
    last record says; no record without its instance; a holder only while active/interrupted."""
    out = []
    for id_ in history:
        if id_ not in instances:
            out.append(f"history records of {id_}, which doesn't exist")
    for id_, inst in instances.items():
        h = history.get(id_, [])
        versions = [r.get("version") for r in h]
        if versions != list(range(1, len(h) + 1)):
            gaps = [v for a, v in zip(range(1, len(h) + 1), versions, strict=False) if a != v][:5]
            out.append(
                f"{id_} ({inst.get('ref')}): history versions are not 1..{len(h)} (first "
                f"off: {gaps})"
            )
            continue
        if not h:
            out.append(f"{id_} ({inst.get('ref')}): no history record")
            continue
        last = h[-1]
        if inst.get("version") != len(h):
            out.append(f"{id_}: version {inst.get('version')} but {len(h)} history records")
        if inst.get("state") != last.get("to") or inst.get("status") != last.get("status"):
            out.append(
                f"{id_}: the row says {inst.get('state')}/{inst.get('status')}, its last record "
                f"{last.get('to')}/{last.get('status')}"
            )
        if h[0].get("from") is not None or h[0].get("event") != "enter":
            out.append(f"{id_}: its first record is not the enter that made it")
        if inst.get("status") in ("paused", "completed") and inst.get("holder") is not None:
            out.append(f"{id_}: {inst.get('status')} but held by {inst.get('holder')}")
        if inst.get("status") == "active" and not inst.get("holder"):
            out.append(f"{id_}: active without a holder")
    return out


def session_records(snap: Snapshot) -> dict[str, list[tuple[str, str, str]]]:
    """Each session's history records as (at, ref, event), in time order."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for id_, recs in snap.history.items():
        ref = snap.ref_of(id_)
        for r in recs:
            out.setdefault(str(r.get("session")), []).append(
                (str(r.get("at")), ref, str(r.get("event")))
            )
    for recs in out.values():
        recs.sort()
    return out


def check_calls(
    calls: list[Call], snap: Snapshot, extra_ok: Callable[[Call], bool] | None = None
) -> list[str]:
    """The history against the calls (each call: s session, r ref, e event, k kind, in each
    session's order). Without `extra_ok`: per session the records are exactly the accepted
    calls. With it: the accepted calls are all there in order, and each extra record is
    matched by a call for which `extra_ok` says its commit may have landed (a killed call, an
    unknown outcome), at most one record each."""
    out = []
    by_session: dict[str, list[Call]] = {}
    for c in calls:
        if c.get("s"):
            by_session.setdefault(c["s"], []).append(c)
    records = session_records(snap)
    for key in sorted(set(by_session) | set(records)):
        mine = by_session.get(key, [])
        recs = [(ref, ev) for _, ref, ev in records.get(key, [])]
        if extra_ok is None:
            accepted = [(c["r"], c["e"]) for c in mine if c["k"] == "ok"]
            if accepted != recs:
                n = next(
                    (i for i, (a, b) in enumerate(zip(accepted, recs, strict=False)) if a != b),
                    min(len(accepted), len(recs)),
                )
                out.append(
                    f"session {key}: {len(accepted)} accepted calls but {len(recs)} history "
                    f"records; first difference at #{n}: call {accepted[n : n + 1]} record "
                    f"{recs[n : n + 1]}"
                )
            continue
        # the records must be the accepted calls in order, with any of the maybe-landed ones
        # among them: the set of record positions the calls so far can have reached
        reach = {0}
        for n, c in enumerate(mine):
            want = (c["r"], c["e"])
            step = {j + 1 for j in reach if j < len(recs) and recs[j] == want}
            if c["k"] == "ok":
                reach = step
            elif extra_ok(c):
                reach |= step
            if not reach:
                out.append(
                    f"session {key}: accepted call {want} (#{n}) is not in the history where "
                    "it belongs"
                )
                break
        else:
            if len(recs) not in reach:
                out.append(
                    f"session {key}: {len(recs) - max(reach)} history records no call accounts "
                    f"for: {recs[max(reach) : max(reach) + 3]}"
                )
    return out


def check_replies(calls: list[Call], allowed: set[str]) -> tuple[Counter[str], list[str]]:
    kinds: Counter[str] = Counter(c["k"] for c in calls)
    bad = [
        f"{c.get('s')} {c['e']} {c['r']} → exit {c['c']} ({c['k']}): {c.get('m', '')}"
        for c in calls
        if c["k"] not in allowed
    ]
    return kinds, bad[:20] + ([f"... and {len(bad) - 20} more"] if len(bad) > 20 else [])
