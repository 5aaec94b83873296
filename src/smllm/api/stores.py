"""Opening the stores of a set of configs, and reading them as one (the engine's `Reader`)."""

from __future__ import annotations

import os

from ..errors import StoreError
from ..store.sqlite import SqliteStore
from ..store.user import state_home, user_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..engine.records import Instance
    from ..machine.model import Loaded
    from ..machine.summary import StoreSpec, Summary
    from ..store.base import InstanceStore, SessionStore

__all__ = ["Stores", "brokered", "open_store", "state_home", "store_url", "user_store"]

STORE_FILE = "smllm.db"

#: whether PostgreSQL stores opened now read through their broker (`brokered`)
_brokered = False


class brokered:
    """Within it, a PostgreSQL store opened reads instances and the paused list through the
    store's broker (store/brokered.py): the stop hook's choice, which pays psycopg's import
    and a connection otherwise. Commands, `smllm mcp` and library callers read directly."""

    def __enter__(self) -> None:
        global _brokered
        self._was = _brokered
        _brokered = True

    def __exit__(self, *exc: object) -> None:
        global _brokered
        _brokered = self._was


def open_store(spec: StoreSpec) -> InstanceStore:
    """An instance store: a returned commit survives power loss (`synchronous=FULL`)."""
    if spec.kind == "dir":
        return SqliteStore(os.path.join(spec.value, STORE_FILE), gitignore=True, durable=True)
    if _brokered:
        from ..store.brokered import BrokeredStore  # no psycopg while the broker answers

        return BrokeredStore(store_url(spec), spec.namespace)
    from ..store.postgres import PostgresStore  # psycopg itself only at the first query

    return PostgresStore(store_url(spec), spec.namespace)


def store_url(spec: StoreSpec) -> str:
    """A PostgreSQL store's URL: `url` as given, `url-env` read from its variable at each use
    (machine-format §1), so a rotated secret is picked up without editing the config."""
    if spec.kind == "url":
        return spec.value
    url = os.environ.get(spec.value, "")
    if not url:
        raise StoreError(f"state.url-env names {spec.value}, which is unset or empty")
    return url


class Stores:
    """The instance stores of `loaded`'s machines, read as one, plus the user's store."""

    def __init__(
        self,
        loaded: Loaded | Summary,
        user: SessionStore,
        opened: dict[StoreSpec, InstanceStore] | None = None,
    ) -> None:
        self.loaded = loaded
        self.user = user
        # stores stay open across calls of one process: a new SQLite connection costs its
        # setup and, on its first commit, an extra sync of the folder
        self._by_spec: dict[StoreSpec, InstanceStore] = opened if opened is not None else {}
        self._found_in: dict[tuple[str, str], InstanceStore] = {}

    def store_of(self, machine: str) -> InstanceStore | None:
        spec = self.loaded.stores.get(machine)
        if spec is None:
            return None
        if spec not in self._by_spec:
            self._by_spec[spec] = open_store(spec)
        return self._by_spec[spec]

    def instance_stores(self) -> list[InstanceStore]:
        for spec in self.loaded.config_stores.values():
            if spec not in self._by_spec:
                self._by_spec[spec] = open_store(spec)
        return list(self._by_spec.values())

    def store_for(self, instance: Instance) -> InstanceStore:
        """Where `instance` lives: its machine's store, or the store it was read from when
        its machine is no longer configured."""
        store = self.store_of(instance.machine) or self._found_in.get(
            (instance.machine, instance.id)
        )
        if store is None:
            raise StoreError(f"no store holds {instance.machine} instance {instance.id}")
        return store

    # -- the engine's Reader -------------------------------------------------------------------

    def instance(self, machine: str, id: str) -> Instance | None:
        store = self.store_of(machine)
        if store is not None:
            return store.instance(machine, id)
        # an unconfigured machine: its instances may still be in any store we know
        for other in self.instance_stores():
            found = other.instance(machine, id)
            if found is not None:
                self._found_in[(machine, id)] = other
                return found
        return None

    def find(self, machine: str, id_or_ref: str) -> Instance | None:
        store = self.store_of(machine)
        return store.find(machine, id_or_ref) if store is not None else None

    def held_by(self, key: str) -> list[Instance]:
        """Every store's instances held by session `key` (engine/recover.py)."""
        found: list[Instance] = []
        for store in self.instance_stores():
            found += store.held_by(key)
        found.sort(key=lambda i: i.updated, reverse=True)
        return found

    def session_taken(self, key: str) -> bool:
        return self.user.key_taken(key)

    def taken(self, machine: str, value: str) -> bool:
        store = self.store_of(machine)
        return store.taken(machine, value) if store is not None else False

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]:
        groups: dict[int, tuple[InstanceStore, list[str]]] = {}
        for machine in machines:
            store = self.store_of(machine)
            if store is not None:
                groups.setdefault(id(store), (store, []))[1].append(machine)
        found: list[Instance] = []
        total = 0
        for store, names in groups.values():
            listed, count = store.paused(names, limit)
            found.extend(listed)
            total += count
        if len(groups) > 1:  # several stores: their lists merged in the engine's order
            from ..engine.idle import sort_paused

            sort_paused(found)
            if limit is not None:
                found = found[:limit]
        return found, total
