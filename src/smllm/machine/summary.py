"""What the cheap calls need of a set of configs' machines: each machine's kind and store.

The status line and a yielded session's stop read only this. The compiled cache keeps it in
its header, where it reads back with `marshal` (built in, loaded by every interpreter) without
unpickling the machines or importing `machine/model.py` and `_pickle`: on the hook path that
is a few milliseconds, a tenth of the call.
"""

from __future__ import annotations

from ..recordclass import Record

__all__ = ["MachineKind", "StoreSpec", "Summary", "from_plain", "to_plain"]


class StoreSpec(Record):
    """Where a config's instances live: `dir` (embedded SQLite) or a PostgreSQL url."""

    kind: str  # "dir" | "url" | "url-env"
    value: str  # absolute folder, url, or variable name
    namespace: str


class MachineKind(Record):
    """A machine as the summary has it: its kind alone (`issue`, `document`, ...)."""

    kind: str


class Summary(Record):
    """The machines of one set of configs, by kind and store (a `Loaded`'s light part)."""

    configs: tuple[str, ...]
    machines: dict[str, MachineKind]  # config order
    stores: dict[str, StoreSpec]  # machine id → its config's store
    config_stores: dict[str, StoreSpec]  # each config read → its store, machines or not


#: the summary as plain values (marshal's types): configs, (id, kind)s, (machine, spec)s and
#: (config, spec)s, a spec as its three strings
Plain = tuple[
    tuple[str, ...],
    tuple[tuple[str, str], ...],
    tuple[tuple[str, tuple[str, str, str]], ...],
    tuple[tuple[str, tuple[str, str, str]], ...],
]


def to_plain(summary: Summary) -> Plain:
    return (
        summary.configs,
        tuple((name, m.kind) for name, m in summary.machines.items()),
        tuple((name, _plain_spec(spec)) for name, spec in summary.stores.items()),
        tuple((name, _plain_spec(spec)) for name, spec in summary.config_stores.items()),
    )


def _plain_spec(spec: StoreSpec) -> tuple[str, str, str]:
    return (spec.kind, spec.value, spec.namespace)


def from_plain(plain: Plain) -> Summary:
    configs, machines, stores, config_stores = plain
    return Summary(
        tuple(configs),
        {name: MachineKind(kind) for name, kind in machines},
        {name: StoreSpec(*spec) for name, spec in stores},
        {name: StoreSpec(*spec) for name, spec in config_stores},
    )
