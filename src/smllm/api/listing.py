"""The read-only use cases behind `session list|show --json`, `session show --audit` and
`instance list|show`: what a surface lists, as records, with the stores read through the
library (no surface opens a store). Post-state: nothing is written, ever.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.held import kind_of
from ..engine.records import Instance, Session
from ..errors import CallError, NoConfig, NotFound, StoreError
from ..machine.model import Loaded
from ..text.listing import InstanceDetail, SessionLine
from .sessions import echoed
from .stores import Stores

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from .app import App

__all__ = [
    "audit_of",
    "instance_detail",
    "instances_here",
    "session_line",
    "session_lines",
]


def session_line(app: App, session: Session) -> SessionLine:
    if session.holding is None and session.interrupted is None:
        return SessionLine(session, None, None, None, None)
    try:
        loaded = app.load(session.configs)
        stores = Stores(loaded, app.user, app.opened)
        held = stores.instance(*session.holding) if session.holding else None
        slot = stores.instance(*session.interrupted) if session.interrupted else None
    except StoreError as exc:
        return SessionLine(session, None, None, None, str(exc))
    kind = kind_of(loaded, held.machine) if held is not None else None
    return SessionLine(session, held, slot, kind, None)


def session_lines(app: App) -> list[SessionLine]:
    """Every session, most recently active first; a session whose store can't be read is
    listed with the problem (one broken store never hides the others)."""
    return [session_line(app, s) for s in app.user.sessions()]


def _loaded_here(app: App) -> tuple[Loaded, Stores]:
    configs = app.configs_here()
    if not configs:
        raise NoConfig()
    loaded = app.load(configs)
    return loaded, Stores(loaded, app.user, app.opened)


def instances_here(app: App, machine: str | None, statuses: Sequence[str] | None) -> list[Instance]:
    """The instances of the machines configured here, by machine in config order, then most
    recently updated first."""
    loaded, stores = _loaded_here(app)
    found: list[Instance] = []
    for m in loaded.machines:
        if machine not in (None, m):
            continue
        store = stores.store_of(m)
        if store is not None:
            found += store.instances([m], statuses or None)
    return found


def instance_detail(app: App, id_or_ref: str, machine: str | None) -> InstanceDetail:
    """One instance of the machines configured here, and its history, oldest first."""
    loaded, stores = _loaded_here(app)
    names = [m for m in loaded.machines if machine in (None, m)]
    hits = [i for i in (stores.find(m, id_or_ref) for m in names) if i is not None]
    if not hits:
        raise NotFound(f"no instance {id_or_ref}")
    if len(hits) > 1:
        several = ", ".join(i.machine for i in hits)
        raise NotFound(
            f"{id_or_ref} names instances of several machines ({several}); pass --machine"
        )
    inst = hits[0]
    store = stores.store_of(inst.machine)
    assert store is not None
    return InstanceDetail(inst, kind_of(loaded, inst.machine), store.history(inst.machine, inst.id))


def audit_of(app: App, key: str) -> list[Any]:
    if app.user.session(key) is None:
        raise CallError(f"no session {echoed(key)}")
    return app.user.audit(key)
