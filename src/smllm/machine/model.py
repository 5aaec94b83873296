"""The compiled machine: immutable records the engine reads (machine-format.md §2).

Everything here is a NamedTuple of plain values so a compiled machine pickles into the cache
and loads back without YAML. Shorthands are already expanded; defaults are filled in.
"""

from __future__ import annotations

from ..recordclass import Record
from .summary import StoreSpec

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from .findings import Finding

__all__ = [
    "BUILTIN_EVENTS",
    "DEFAULT_TIMEOUT_SECS",
    "MAX_TIMEOUT_SECS",
    "Action",
    "Command",
    "EventDef",
    "Guard",
    "IdlePrompt",
    "Loaded",
    "Machine",
    "ParamSpec",
    "RefSpec",
    "Shared",
    "State",
    "StoreSpec",
    "Transition",
]

#: engine.md §5: the events smllm adds to every machine, in offer order.
BUILTIN_EVENTS = ("enter", "resume", "listPaused", "yield", "pause", "unmatched")

#: machine-format.md §2.8: a command's default timeout.
DEFAULT_TIMEOUT_SECS = 60
#: the longest timeoutSecs: a year is past any check, and a huge integer has no float
MAX_TIMEOUT_SECS = 366 * 24 * 3600


class Command(Record):
    """What a `command` guard or action runs."""

    run: str | tuple[str, ...]
    timeout: float
    timeout_text: str  # as the author wrote it, for "timed out after Ns"
    cwd: str | None  # absolute, resolved against the machine file's folder

    def shown(self) -> str:
        """RUN as the trace shows it: the string, or `[a, b, c]`."""
        if isinstance(self.run, str):
            return self.run
        return "[" + ", ".join(self.run) + "]"


class Guard(Record):
    kind: str  # "command" | "visits"
    command: Command | None = None
    state: str = ""  # visits
    at_least: int = 0  # visits


class Action(Record):
    kind: str  # "prompt" | "command" | "setRef"
    text: str | None = None  # prompt text (normalised)
    file: str | None = None  # prompt file, absolute
    file_shown: str = ""  # prompt file as written, for "Prompt failed: FILE"
    command: Command | None = None
    optional: bool = False  # the implied enter-STATE.md: its absence is silent


class Transition(Record):
    target: str | None
    guard: Guard | None
    actions: tuple[Action, ...]
    reenter: bool
    description: str | None

    @property
    def set_ref(self) -> bool:
        return any(a.kind == "setRef" for a in self.actions)


class ParamSpec(Record):
    """One param of an event in one state, as checks and the events list need it."""

    name: str
    required: bool
    is_string: bool  # a string param, else a JSON param
    enum: tuple[str, ...] | None
    pattern: str | None
    description: str | None
    schema: dict[str, Any]  # the property's own schema
    schema_shown: str | None  # compact sorted JSON when it says more than its type
    plain: bool  # a string param that uses only description/enum/pattern


class EventDef(Record):
    name: str
    description: str | None
    source: str  # "agent" | "host"
    params: tuple[ParamSpec, ...]  # declared params, in declaration order
    defs: dict[str, Any] | None  # the params object's $defs, for $ref


class Shared(Record):
    number: int  # position in meta.sharedActions, for failure lines
    states: frozenset[str]
    before: bool
    entry: tuple[Action, ...]
    exit: tuple[Action, ...]


class State(Record):
    name: str
    final: bool
    entry_point: bool
    fallback: bool
    entry: tuple[Action, ...]
    exit: tuple[Action, ...]
    on: dict[str, tuple[Transition, ...]]  # file order
    always: tuple[Transition, ...]
    params: dict[str, tuple[ParamSpec, ...]]  # event → params in this state (implied ref too)
    implied_prompt: str | None  # absolute path of enter-STATE.md, when used


class RefSpec(Record):
    param: str
    pattern: str | None
    description: str | None


class Machine(Record):
    id: str
    description: str | None
    initial: str
    kind: str
    ref: RefSpec
    events: dict[str, EventDef]
    states: dict[str, State]
    shared: tuple[Shared, ...]
    file: str  # absolute path of the machine file
    fallback: str | None

    def entry_points(self) -> list[str]:
        return [s.name for s in self.states.values() if s.entry_point]

    def host_only(self) -> bool:
        """Every event any state uses is `source: host` (engine.md §5.1 check 4)."""
        used = [e for s in self.states.values() for e in s.on]
        return bool(used) and all(self.source(e) == "host" for e in used)

    def source(self, event: str) -> str:
        ev = self.events.get(event)
        return ev.source if ev is not None else "agent"

    def host_events(self) -> list[str]:
        seen = dict.fromkeys(e for s in self.states.values() for e in s.on)
        return [e for e in seen if self.source(e) == "host"]


# -- what a load of configs hands the engine -------------------------------------------------


class IdlePrompt(Record):
    text: str | None
    file: str | None  # absolute
    shown: str


class Loaded(Record):
    """The machines of one set of configs, ready for the engine."""

    configs: tuple[str, ...]
    machines: dict[str, Machine]  # config order
    stores: dict[str, StoreSpec]  # machine id → its config's store
    config_stores: dict[str, StoreSpec]  # each config read → its store, machines or not
    idle: IdlePrompt | None
    findings: tuple[Finding, ...]
    files: tuple[str, ...]  # every file read or looked for (cache key)
    #: ids of machine files with errors (their top-level `id:`) and of CFG-5's withdrawn
    #: machines: validate checks no saved instance of these (INS rules skip them, §1)
    withdrawn: tuple[str, ...] = ()
