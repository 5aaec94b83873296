"""An in-memory world for the sans-IO engine: its `Reader` in dicts, and commits as a store
makes them, with no SQLite anywhere (test_engine_sans_io_world.py checks that nothing here or
in the engine imports `sqlite3`).

- `MemoryReader` implements `smllm.engine.host.Reader` over plain dicts (instances by id,
  sessions by key) and keeps the history and audit records the commits append. `paused` orders
  by engine.md §5.3 with its own comparison (not `engine.idle.sort_paused`), so a wrong sort in
  the engine shows as a difference.
- `MemoryReader.apply(outcome)` applies an `Outcome`'s writes as `SqliteStore` does: the
  instance writes all or nothing (a stale version → `StoreConflict`; a taken id or
  `(machine, ref)` → `RefTaken`), a history record per write, then the session through
  `SessionWrite.merge` (a changed `holding` → `StoreConflict`) with its audit records.
- `World` is the edge that `smllm.api.app.App` is for the real stores, without files, locks or
  a cache: it loads the machines once, turns calls into `Call`s, recovers a session an
  interrupted call left behind (`engine.recover`), fires, commits and answers a lost race
  with the engine's `lost` reply, as `App.commit` does.

Usage::

    cwd, config = write_project(tmp_path, DEV_MACHINE)
    world = World(load_configs((config,)), ScriptedHost(seed=3), cwd=cwd)
    key = world.new_session().key
    world.fire(key, "enter", ("stateMachine", "dev"), ("issueId", "GH-1"))
    assert world.reader.find("dev", "GH-1").state == "PLAN"
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from functools import cmp_to_key
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from smllm.engine.call import Call, Outcome
from smllm.engine.fire import fire, lost
from smllm.engine.host import Host
from smllm.engine.prompt import prompt_submitted
from smllm.engine.records import (
    ACTIVE,
    INTERRUPTED,
    PAUSED,
    AuditRecord,
    HistoryRecord,
    Instance,
    InstanceWrite,
    Session,
    SessionWrite,
    iso,
)
from smllm.engine.recover import recovery
from smllm.engine.reply import Reply
from smllm.engine.stop import StopOutcome, stop
from smllm.engine.view import view
from smllm.errors import RefTaken, StoreConflict
from smllm.machine.model import Loaded
from smllm.text.block import render

__all__ = ["DEV_MACHINE", "Fired", "MemoryReader", "World", "paused_order", "write_project"]

#: the seed's example machine (an issue from PLAN to WORK to DONE; a `test -f PLAN.md` guard)
DEV_MACHINE = Path(__file__).resolve().parents[2] / "src/smllm/examples/dev/dev.smllm.yaml"


def write_project(root: Path, *machine_files: Path) -> tuple[str, str]:
    """root/project/.smllm holding copies of `machine_files` and a config.toml that lists them
    in order: (the project folder, the config's path) for `load_configs` and `World`."""
    smllm_dir = root / "project" / ".smllm"
    smllm_dir.mkdir(parents=True)
    for path in machine_files:
        shutil.copy(path, smllm_dir)
    listed = ", ".join(f'"{p.name}"' for p in machine_files)
    (smllm_dir / "config.toml").write_text(f"[machines]\nfiles = [{listed}]\n")
    return str(root / "project"), str(smllm_dir / "config.toml")


def _paused_cmp(a: Instance, b: Instance) -> int:
    """engine.md §5.3: `updated` descending; ties by machine id, then label, by code point."""
    if a.updated != b.updated:
        return -1 if a.updated > b.updated else 1
    ka, kb = (a.machine, a.label), (b.machine, b.label)
    return (ka > kb) - (ka < kb)


def paused_order(instances: Sequence[Instance]) -> list[Instance]:
    return sorted(instances, key=cmp_to_key(_paused_cmp))


class MemoryReader:
    """The engine's `Reader` over dicts, plus the records a store keeps and its commits."""

    def __init__(self) -> None:
        self.instances: dict[str, Instance] = {}  # by id (ids are unique across machines)
        self.sessions: dict[str, Session] = {}
        self.history: dict[str, list[HistoryRecord]] = {}  # instance id → oldest first
        self.audit: dict[str, list[AuditRecord]] = {}  # session key → oldest first

    # -- the engine's Reader -------------------------------------------------------------------

    def instance(self, machine: str, id: str) -> Instance | None:
        found = self.instances.get(id)
        return found if found is not None and found.machine == machine else None

    def find(self, machine: str, id_or_ref: str) -> Instance | None:
        found = self.instance(machine, id_or_ref)
        if found is not None:
            return found
        return next(
            (i for i in self.instances.values() if i.machine == machine and i.ref == id_or_ref),
            None,
        )

    def taken(self, machine: str, value: str) -> bool:
        return value in self.instances or any(
            i.machine == machine and i.ref == value for i in self.instances.values()
        )

    def session_taken(self, key: str) -> bool:
        return key in self.sessions

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]:
        found = paused_order(
            [i for i in self.instances.values() if i.status == PAUSED and i.machine in machines]
        )
        return (found if limit is None else found[:limit]), len(found)

    # -- beyond the protocol: what `App` reads ---------------------------------------------------

    def session(self, key: str) -> Session | None:
        return self.sessions.get(key)

    def held_by(self, key: str) -> list[Instance]:
        """`active` and `interrupted` instances held by `key`, most recently updated first."""
        held = [
            i
            for i in self.instances.values()
            if i.status in (ACTIVE, INTERRUPTED) and i.holder == key
        ]
        held.sort(key=lambda i: i.id)
        held.sort(key=lambda i: i.updated, reverse=True)
        return held

    # -- commits -------------------------------------------------------------------------------

    def apply_instances(self, writes: Sequence[InstanceWrite]) -> None:
        """All or nothing, in order; StoreConflict on a stale version, RefTaken on a taken id
        or ref (what `SqliteStore.commit_instances` does)."""
        staged = dict(self.instances)
        for w in writes:
            i = w.instance
            stored = staged.get(i.id)
            if w.expected == 0:
                if stored is not None:
                    raise RefTaken(i.machine, i.ref or i.id)
            elif stored is None or stored.version != w.expected:
                raise StoreConflict(i.machine, i.id)
            if i.ref is not None and any(
                o.id != i.id and o.machine == i.machine and o.ref == i.ref for o in staged.values()
            ):
                raise RefTaken(i.machine, i.ref)
            staged[i.id] = i
        self.instances = staged
        for w in writes:
            self.history.setdefault(w.instance.id, []).append(w.history)

    def apply_session(self, write: SessionWrite, audit: Sequence[AuditRecord]) -> Session:
        """Create the session, or merge the write into the stored one (`SessionWrite.merge`:
        StoreConflict when its `holding` changed); the audit records go with it."""
        key = write.session.key
        if write.create:
            if key in self.sessions:
                raise StoreConflict("", key)
            new = write.session
        else:
            current = self.sessions.get(key)
            if current is None:
                raise StoreConflict("", key)
            new = write.merge(current)
        self.sessions[key] = new
        self.append_audit(key, audit)
        return new

    def append_audit(self, key: str, audit: Sequence[AuditRecord]) -> None:
        if audit:
            self.audit.setdefault(key, []).extend(audit)

    def apply(self, outcome: Outcome) -> Session | None:
        """An outcome's writes: the instances first (the truth), then the session; the
        session as stored after, or None when the outcome writes no session."""
        self.apply_instances(outcome.instances)
        if outcome.session is None:
            return None
        return self.apply_session(outcome.session, outcome.audit)

    # -- comparing worlds ----------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """Every record as JSON, in a fixed order (test_engine_sans_io_world.py reads the App's
        SQLite stores into the same shape)."""
        return {
            "instances": [self.instances[k].to_json() for k in sorted(self.instances)],
            "history": {k: [h.to_json() for h in v] for k, v in sorted(self.history.items())},
            "sessions": [self.sessions[k].to_json() for k in sorted(self.sessions)],
            "audit": {
                k: [[a.at, a.kind, a.detail] for a in v] for k, v in sorted(self.audit.items())
            },
        }


class Fired(NamedTuple):
    """One call through the world: the engine's outcome, the one committed (the engine's
    `lost` reply when the commit lost a race), and the session after the call."""

    outcome: Outcome
    committed: Outcome
    session: Session | None


H = TypeVar("H", bound=Host)


class World(Generic[H]):
    """`App` without IO: one set of loaded machines, a `MemoryReader` and a host."""

    def __init__(
        self,
        loaded: Loaded,
        host: H,
        *,
        cwd: str = "/project",
        configs: tuple[str, ...] = (),
        reader: MemoryReader | None = None,
    ) -> None:
        self.loaded = loaded
        self.host = host
        self.cwd = cwd
        self.configs = configs or loaded.configs
        self.reader = reader if reader is not None else MemoryReader()

    def session(self, key: str) -> Session:
        s = self.reader.session(key)
        assert s is not None, f"no session {key}"
        return s

    def new_session(self, harness: str = "none", host_session: str | None = None) -> Session:
        """`App.new_session`: a session in idle, the same clock reading and key draws."""
        at = iso(self.host.now())
        key = self.host.new_id("sm-")
        while self.reader.session_taken(key):
            key = self.host.new_id("sm-")
        new = Session(
            key, harness, host_session, self.cwd, self.configs, None, None, False, 0, 1, at, at
        )
        detail = {
            "harness": harness,
            "hostSession": host_session,
            "cwd": self.cwd,
            "configs": list(self.configs),
        }
        write = SessionWrite(new, True, None, frozenset())
        return self.reader.apply_session(write, (AuditRecord(at, "bind", detail),))

    def recovered(self, s: Session, write: bool) -> Session:
        """`App._recovered`: an idle session takes back what its instances say it holds."""
        if s.holding is not None:
            return s
        found = recovery(self.loaded, s, self.reader.held_by(s.key), lambda: iso(self.host.now()))
        if found is None:
            return s
        sw, audit = found
        if not write:
            return sw.session
        try:
            return self.reader.apply_session(sw, audit)
        except StoreConflict:
            return self.session(s.key)

    def call(
        self,
        key: str | None,
        event: str,
        *params: tuple[str, Any],
        source: str = "agent",
        harness: str = "none",
    ) -> Call:
        """The `Call` that `App.fire` would hand the engine now (the session as stored)."""
        s = None if key is None else self.recovered(self.session(key), write=True)
        configs = s.configs if s is not None else self.configs
        return Call(event, tuple(params), source, s, harness, self.cwd, configs)

    def fire(
        self,
        key: str | None,
        event: str,
        *params: tuple[str, Any],
        source: str = "agent",
        harness: str = "none",
    ) -> Fired:
        call = self.call(key, event, *params, source=source, harness=harness)
        return self.commit(call, fire(self.loaded, call, self.reader, self.host))

    def commit(self, call: Call, outcome: Outcome) -> Fired:
        """`App.commit`: the instance writes, then the session; a lost race commits only the
        loser's return to idle and replies with the engine's message for it."""
        try:
            self.reader.apply_instances(outcome.instances)
        except (StoreConflict, RefTaken) as exc:
            answer = lost(self.loaded, call, self.reader, self.host, exc, outcome)
            return Fired(outcome, answer, self._commit_session(call, answer))
        return Fired(outcome, outcome, self._commit_session(call, outcome))

    def _commit_session(self, call: Call, outcome: Outcome) -> Session | None:
        if outcome.session is None:
            return call.session
        try:
            return self.reader.apply_session(outcome.session, outcome.audit)
        except StoreConflict:
            return self.reader.session(outcome.session.session.key)

    def view(self, key: str) -> Reply:
        s = self.recovered(self.session(key), write=False)
        return view(self.loaded, s, self.reader, self.host)

    def stop(self, key: str, continuing: bool | None) -> StopOutcome:
        """`App.stop`: the decision, with its session write or its audit record committed."""
        s = self.recovered(self.session(key), write=True)
        outcome = stop(self.loaded, s, continuing, self.reader, self.host, render)
        if outcome.session is None:
            self.reader.append_audit(key, outcome.audit)
        else:
            try:  # noqa: SIM105 - as App.stop: the next stop decides
                self.reader.apply_session(outcome.session, outcome.audit)
            except StoreConflict:
                pass
        return outcome

    def prompt(self, key: str, text: str | None = None) -> None:
        """`App.prompt_submitted`."""
        write, audit = prompt_submitted(self.session(key), self.host, text)
        if write is not None:
            try:  # noqa: SIM105 - as App.prompt_submitted
                self.reader.apply_session(write, audit)
            except StoreConflict:
                pass
