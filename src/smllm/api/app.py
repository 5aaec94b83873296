"""The library API: bind, view, fire, stop, prompt submitted (engine.md §1).

This is the edge where the sans-IO engine meets the stores and the real host: it loads the
configs (through the compiled cache), runs the engine, commits its writes, and turns a lost
race into the engine's "another session changed …" reply. Surfaces (CLI, MCP, hooks) call it.
"""

from __future__ import annotations

import os
from time import monotonic

from ..engine.records import iso
from ..errors import (
    CallError,
    RefTaken,
    SessionBusy,
    StoreConflict,
)
from ..recordclass import Record
from .calllock import CallLock
from .sessions import PASS_KEY, echoed, locked, session_of
from .stores import Stores, user_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..engine.host import Host
    from ..engine.records import AuditRecord, Session
    from ..engine.reply import Reply
    from ..machine.model import Loaded, StoreSpec
    from ..store.base import InstanceStore, SessionStore

if TYPE_CHECKING:
    # the fire path loads the whole engine; a view (every hook) needs only its part of it
    from ..engine.call import Call, Outcome
    from ..engine.status import Status
    from ..engine.stop import StopOutcome

__all__ = ["App", "CallError", "Result", "late_note"]

_LATE = frozenset({"lateCall"})


def _committed(record: AuditRecord, elapsed: float) -> AuditRecord:
    """An event's audit record with the time its call committed: the call's one clock reading
    (engine.md §12) plus how long the engine ran, a guard of minutes included."""
    if record.kind != "event":
        return record
    from datetime import datetime, timedelta

    at = datetime.fromisoformat(record.at.replace("Z", "+00:00")) + timedelta(seconds=elapsed)
    return record._replace(detail={**record.detail, "committed": iso(at)})


def late_note(event: str) -> str:
    """The line before the next reply after a call its client gave up on (issue 20 §1)."""
    return (
        f"note: your last call ({echoed(event)}) was carried out after the client stopped "
        "waiting for its reply; what it did stands"
    )


class Result(Record):
    ok: bool
    reply: Reply
    session: Session | None  # the session after the call (None: no session was made)
    stores: Stores
    loaded: Loaded  # the machines the call read (their load errors are the CLI's to note)
    #: one line before the block: the session's last call was carried out after its client
    #: stopped waiting (late_note)
    notice: str | None = None

    def text(self) -> str:
        from ..text.block import render

        block = render(self.reply)
        return block if self.notice is None else f"{self.notice}\n{block}"

    def location(self) -> dict[str, Any] | None:
        s = self.session
        if s is None or s.holding is None:
            return None
        inst = self.stores.instance(*s.holding)
        if inst is None:
            return None
        return {"machine": inst.machine, "state": inst.state, "instance": inst.id, "ref": inst.ref}

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "session": self.session.key if self.session else None,
            "location": self.location(),
            "text": self.text(),
        }


def _render(reply: Reply) -> str:
    """A block's text (imported only when a stop blocks)."""
    from ..text.block import render

    return render(reply)


class App:
    """One process's view of smllm: the user store, the real host, the config lookup."""

    def __init__(
        self,
        cwd: str | None = None,
        config: str | None = None,
        host: Host | None = None,
        env: Mapping[str, str] | None = None,
        user: SessionStore | None = None,
    ) -> None:
        """`user`: the user store, when the caller has it open already (a hook that read the
        session's binding), so that one process opens it once."""
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.config = config
        if host is None:
            from .system import SystemHost

            host = SystemHost(env)
        self.host = host
        self.user: SessionStore = user if user is not None else user_store()
        self.opened: dict[StoreSpec, InstanceStore] = {}

    # -- loading -------------------------------------------------------------------------------

    def configs_here(self) -> tuple[str, ...]:
        from ..machine.configs.config import find_configs

        return find_configs(self.cwd, self.config)

    def load(self, configs: tuple[str, ...]) -> Loaded:
        from ..machine.configs.cache import load_cached

        return load_cached(configs)

    def session(self, key: str) -> Session:
        return session_of(self.user, key)

    # -- calls ---------------------------------------------------------------------------------

    def view(self, key: str | None, tell_late: bool = True) -> Result:
        """The read-only view of a session (engine.md §4.4). A session whose last call ended
        after its client stopped waiting says so once, and the mark is cleared; `tell_late`
        False leaves it for the agent's next reply (a shell completion's look)."""
        from ..engine.view import view

        if key is None:
            raise CallError(f"to see where you are, {PASS_KEY}")
        s = self.session(key)
        loaded, stores = self._opened(s)
        s = self._recovered(loaded, s, stores, write=False)
        result = Result(True, view(loaded, s, stores, self.host), s, stores, loaded)
        if s.late_call is None or not tell_late:
            return result
        locked = self._locked(key)
        if locked is None:  # another call runs: the note waits for the next reply
            return result
        try:
            if locked[0].late_call is None:  # another reply told it meanwhile
                return result
            return self._told_late(result, locked[0])
        finally:
            locked[1].release()

    def status(self, key: str) -> Status:
        """The status line's values for a session (cli-and-harnesses.md §7); read-only."""
        from .sessions import status_of

        return status_of(self.user, self.session(key), self.opened)

    def bound(self, harness: str, host_session: str) -> Session | None:
        """The session bound to a harness's own session id, if any (read-only)."""
        return self.user.binding(harness, host_session)

    def _locked(self, key: str) -> tuple[Session, CallLock] | None:
        return locked(self.user, key)

    def _opened(self, session: Session) -> tuple[Loaded, Stores]:
        """The session's machines, and its stores read as one."""
        loaded = self.load(session.configs)
        return loaded, Stores(loaded, self.user, self.opened)

    def _recovered(self, loaded: Loaded, session: Session, stores: Stores, write: bool) -> Session:
        """`session`, holding again the instance it holds by the instance records (the truth) when
        a crash cut a call off between its instance and its session commits. A view only
        shows it; a call writes it first (under the call lock)."""
        if session.holding is not None:
            return session
        from ..engine.recover import recovery

        found = recovery(loaded, session, stores.held_by(session.key), lambda: iso(self.host.now()))
        if found is None:
            return session
        sw, audit = found
        if not write:
            return sw.session
        try:
            return self.user.commit_session(sw, audit)
        except StoreConflict:
            return self.session(session.key)

    def fire(
        self,
        key: str | None,
        event: str,
        params: tuple[tuple[str, Any], ...] = (),
        source: str = "agent",
        harness: str = "none",
    ) -> Result:
        """Fire one event. Post-state on error: CallError (SessionBusy included) and
        StoreError leave every store as it was, and no command has run."""
        if key is None and event != "enter":
            raise CallError(f"{echoed(event)} needs a session; {PASS_KEY}")
        if key is None:
            return self._fire(None, self.configs_here(), event, params, source, harness)
        locked = self._locked(key)
        if locked is None:
            raise SessionBusy(echoed(key))
        session, lock = locked
        try:
            result = self._fire(session, session.configs, event, params, source, harness)
            if session.late_call is None:
                return result
            return self._told_late(result, session)
        finally:
            lock.release()

    def _told_late(self, result: Result, before: Session) -> Result:
        """`result` with its line saying that the session's last call was carried out after
        its client stopped waiting, the mark cleared (the caller holds the call lock)."""
        from ..engine.records import SessionWrite

        assert before.late_call is not None
        now = self.user.session(before.key) or before
        write = SessionWrite(now._replace(late_call=None), False, now.holding, _LATE)
        try:  # noqa: SIM105 - contextlib costs an import on a hot path
            self.user.commit_session(write, ())
        except StoreConflict:  # only a writer without the lock: the note shows again
            pass
        return result._replace(notice=late_note(before.late_call))

    def mark_late(self, key: str, event: str) -> bool:
        """Record that the call of session `key` that fired `event` was carried out after its
        client stopped waiting for the reply (an MCP cancel, a closed pipe): the session's next
        reply says so. False when another call holds the session (its reply is the news)."""
        from ..engine.records import SessionWrite

        locked = self._locked(key)
        if locked is None:
            return False
        s, lock = locked
        try:
            write = SessionWrite(s._replace(late_call=event), False, s.holding, _LATE)
            self.user.commit_session(write, ())
            return True
        except StoreConflict:
            return False
        finally:
            lock.release()

    def _fire(
        self,
        session: Session | None,
        configs: tuple[str, ...],
        event: str,
        params: tuple[tuple[str, Any], ...],
        source: str,
        harness: str,
    ) -> Result:
        from ..engine.fire import Call, fire

        loaded = self.load(configs)
        stores = Stores(loaded, self.user, self.opened)
        if session is not None:
            session = self._recovered(loaded, session, stores, write=True)
        call = Call(event, params, source, session, harness, self.cwd, configs)
        started = monotonic()
        outcome = fire(loaded, call, stores, self.host)
        elapsed = monotonic() - started
        if elapsed >= 1.0:  # a guard or action ran a while: the audit says when it committed
            outcome = outcome._replace(audit=tuple(_committed(a, elapsed) for a in outcome.audit))
        return self.commit(loaded, stores, call, outcome)

    def commit(self, loaded: Loaded, stores: Stores, call: Call, outcome: Outcome) -> Result:
        """Apply an outcome's writes: instances first (they are the truth), then the session.

        A lost instance race commits only the loser's return to idle (never an instance
        write) and replies with the engine's message for it.
        """
        from ..engine.fire import lost

        try:
            by_store: dict[int, tuple[Any, list[Any]]] = {}
            for w in outcome.instances:
                store = stores.store_for(w.instance)
                by_store.setdefault(id(store), (store, []))[1].append(w)
            for store, writes in by_store.values():
                store.commit_instances(writes)
        except (StoreConflict, RefTaken) as exc:
            answer = lost(loaded, call, stores, self.host, exc, outcome)
            session = self._commit_session(call, answer)
            return Result(False, answer.reply, session, stores, loaded)
        # a session write that conflicts now comes only from a writer without the call lock
        # (an older smllm): the instance write stands and the reply says so truthfully; the
        # session's next call takes the instance back (`_recovered`)
        session = self._commit_session(call, outcome)
        return Result(outcome.ok, outcome.reply, session, stores, loaded)

    def _commit_session(self, call: Call, outcome: Outcome) -> Session | None:
        """The session after committing `outcome`'s session write: as written, or as stored
        when it conflicts; the call's own when the outcome writes none."""
        if outcome.session is None:
            return call.session
        try:
            return self.user.commit_session(outcome.session, outcome.audit)
        except StoreConflict:
            return self.user.session(outcome.session.session.key)

    # -- sessions and hooks ----------------------------------------------------------------------

    def new_session(
        self,
        harness: str = "none",
        host_session: str | None = None,
        cwd: str | None = None,
        configs: tuple[str, ...] | None = None,
    ) -> Session:
        """A new session in idle, with the configs found from `cwd` (`smllm session new`)."""
        from ..engine.context import bind_audit, new_session
        from ..engine.records import SessionWrite
        from ..machine.configs.config import find_configs

        cwd = cwd or self.cwd
        configs = configs if configs is not None else find_configs(cwd, self.config)
        at = iso(self.host.now())
        new = new_session(self.host, self.user.key_taken, harness, host_session, cwd, configs, at)
        audit = (bind_audit(new, at),)
        if host_session is not None:
            return self.user.bind(new, audit)
        return self.user.commit_session(SessionWrite(new, True, None, frozenset()), audit)

    def stop(self, key: str, continuing: bool | None) -> StopOutcome:
        """engine.md §9 for a session; commits the block count or the return to idle.

        While another call of the session runs (a fire in a background shell), the stop is
        allowed and nothing is written: hooks fail open, and that call's reply decides."""
        from ..engine.stop import ALLOW, stop

        locked = self._locked(key)
        if locked is None:
            return ALLOW
        s, lock = locked
        try:
            loaded, stores = self._opened(s)
            s = self._recovered(loaded, s, stores, write=True)
            outcome = stop(loaded, s, continuing, stores, self.host, _render)
            if outcome.session is None:
                if outcome.audit:  # a runaway stop writes its audit record and nothing else
                    self.user.append_audit(key, outcome.audit)
                return outcome
            try:  # noqa: SIM105 - contextlib would cost an import on the hook path
                self.user.commit_session(outcome.session, outcome.audit)
            except StoreConflict:  # only a writer without the lock: the next stop decides
                pass
            return outcome
        finally:
            lock.release()

    def prompt_submitted(self, key: str, prompt: str | None = None) -> None:
        """A user prompt clears `yielded` and `blocks` (engine.md §9): sessions.py."""
        from .sessions import prompt_submitted

        prompt_submitted(self.user, self.host, key, prompt)

    def bind(self, harness: str, host_session: str, cwd: str) -> Result | None:
        """The session-start hook: the bound session's view, or a new session in idle.

        None when no session is bound and no config is found from `cwd` (the quiet answer).
        """
        bound = self.user.binding(harness, host_session)
        if bound is not None:
            return self.view(bound.key)
        from ..machine.configs.config import find_configs

        configs = find_configs(cwd, None)
        if not configs or _user_config_alone(configs):
            return None
        made = self.new_session(harness, host_session, cwd, configs)
        return self.view(made.key)


def _user_config_alone(configs: tuple[str, ...]) -> bool:
    """Whether the only config found is the user's and it lists no machine: one that only
    records a harness's declined parts (`--scope user --without mcp`) doesn't make every folder
    an smllm project. A user config that can't be read still counts (its problem is shown)."""
    from ..machine.configs.config import read_config, user_config_path

    user = os.path.realpath(user_config_path())
    if configs != (user,):
        return False
    read = read_config(user)
    return not read.machine_files and not read.findings
