"""Warnings and info about a machine (validation.md §2: MCH-13 … 18, EVT-7, EVT-10, EVT-12,
AGT-3, AGT-4). They run on every load whose shape is valid, errors or not (validation.md §1:
every finding at once); only `smllm validate` prints them."""

from __future__ import annotations

from collections import deque

from ..model import BUILTIN_EVENTS, Machine, State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..findings import Path_

    Add = Callable[..., None]

__all__ = ["Broken", "always_loops", "lint"]

#: errors that leave the graph of transitions unknown: a missing initial state or target, a
#: dropped built-in transition (EVT-5), an always without a target, a final state with
#: transitions. With one of them MCH-13 would guess: the fix may add the very edge that
#: reaches a state. A second fallback (MCH-7) is not one: every fallback state counts as a root
#: (validation.md §4), so what no root reaches stays unreachable whichever the fix keeps.
_GRAPH_ERRORS = frozenset({"MCH-1", "MCH-2", "MCH-5", "MCH-6", "EVT-5"})


class Broken:
    """Where a machine's errors are, for the warnings that still run on it: each warning reads
    only parts without an error, so it neither guesses from a broken part nor repeats an
    error's point. MCH-13, MCH-14, MCH-16, AGT-3, EVT-12 and deep.py's AGT-5 skip what an
    error touches (said at each); MCH-15, MCH-17, MCH-18, EVT-7, EVT-10 and AGT-4 read only
    what a valid shape already fixes (a state's type, exit, entryPoint; declared events and
    params), so they always run."""

    def __init__(self, errors: list[tuple[str, Path_]] | None = None) -> None:
        self.rules = {rule for rule, _ in errors or ()}
        self.paths = [path for _, path in errors or ()]

    def under(self, *prefix: str | int) -> bool:
        """An error at `prefix` or inside it."""
        return any(path[: len(prefix)] == prefix for path in self.paths)


def _candidates(data: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], Any]]:
    """(path, transition data) of each candidate of an `on.EVENT` or `always` value."""
    if isinstance(data, list):
        return [((*path, i), item) for i, item in enumerate(data)]
    return [(path, data)]


def lint(machine: Machine, data: dict[str, Any], add: Add, broken: Broken) -> None:
    states = machine.states
    sdata: dict[str, Any] = data["states"]
    if not broken.rules & _GRAPH_ERRORS:
        _reachability(machine, add)
    used: set[str] = set()
    for name, state in states.items():
        raw = sdata.get(name) or {}
        path = ("states", name)
        used.update(state.on)
        # a final state's on and always are MCH-6's error: none of their warnings here
        if state.on and state.always and not state.final:
            add(
                "MCH-14",
                (*path, "always"),
                f"{name} has always, so its on events are never offered",
                at_key=True,
            )
        if state.final and raw.get("exit") is not None:
            add(
                "MCH-15",
                (*path, "exit"),
                f"exit actions of final state {name} never run",
                at_key=True,
            )
        if state.final and state.entry_point:
            add(
                "MCH-17",
                (*path, "meta", "entryPoint"),
                f"entering {name} completes the instance at once",
            )
        for event, candidates in (raw.get("on") or {}).items() if not state.final else ():
            if event not in state.on:
                continue  # a built-in event: EVT-5's error
            for cpath, item in _candidates(candidates, (*path, "on", event)):
                if not isinstance(item, dict) or not item.get("reenter"):
                    continue
                target = item.get("target")
                # a target that names no state is MCH-2's: it may be a typo of this state
                if target != name and (target is None or target in states):
                    add("MCH-16", (*cpath, "reenter"), "reenter has no effect here")
            declared = machine.events.get(event)
            described = declared is not None and declared.description is not None
            if (
                machine.source(event) == "agent"
                and all(t.description is None for t in state.on[event])
                and not described
            ):
                add(
                    "AGT-3",
                    (*path, "on", event),
                    f"{event} has no description in {name}",
                    at_key=True,
                )
    if not any(s.final for s in states.values()):
        add("MCH-18", ("states",), "no final state: instances never complete", at_key=True)
    for event, ev in machine.events.items():
        epath = ("meta", "events", event)
        if event in ("enter", "listPaused") and ev.description is not None:
            add(
                "AGT-4",
                epath,
                f"{event} is only offered in idle, which shows its own description",
                at_key=True,
            )
        if event not in BUILTIN_EVENTS and event not in used:
            add("EVT-10", epath, f"no state uses {event}", at_key=True)
        set_ref = any(t.set_ref for s in states.values() for t in s.on.get(event, ()))
        for spec in ev.params:
            ppath = (*epath, "params", "properties", spec.name)
            if spec.name in ("stateMachine", "state"):
                add("EVT-7", ppath, f"param {spec.name} of {event} looks like enter's", at_key=True)
            elif spec.name == machine.ref.param and not set_ref:
                add(
                    "EVT-7",
                    ppath,
                    f"param {spec.name} of {event} looks like the ref param",
                    at_key=True,
                )
    # a built-in event in `on` (EVT-5) is left out of the machine, and renamed it may be the
    # one agent event
    if used and machine.host_only() and "EVT-5" not in broken.rules:
        add("EVT-12", ("id",), f"only the host can drive {machine.id}; agents can't enter it")


def _reachability(machine: Machine, add: Add) -> None:
    """MCH-13: states no path of `on` and `always` transitions reaches from where instances
    start (the initial state, entry points, every state marked as the fallback)."""
    starts = {machine.initial, *machine.entry_points()}
    starts.update(name for name, state in machine.states.items() if state.fallback)
    seen = set(starts)
    todo = list(starts)
    while todo:
        state = machine.states[todo.pop()]
        for candidates in (*state.on.values(), state.always):
            for t in candidates:
                if t.target is not None and t.target not in seen:
                    seen.add(t.target)
                    todo.append(t.target)
    for name in machine.states:
        if name not in seen:
            add("MCH-13", ("states", name), f"{name} can't be reached", at_key=True)


def always_loops(states: dict[str, State]) -> list[tuple[str, list[str]]]:
    """MCH-4: the loops of `always` edges, as (its first state in file order, the loop).

    Each state on a loop that no earlier finding walked through starts one finding: the
    shortest loop back to it, found breadth-first (linear; a walk of every path is exponential
    in a chain of routers). An always transition to its own state is MCH-5's, not a loop."""
    edges = {
        n: [t.target for t in s.always if t.target in states and t.target != n]
        for n, s in states.items()
    }
    found: list[tuple[str, list[str]]] = []
    reported: set[str] = set()
    for start in states:
        if start in reported:
            continue
        parent: dict[str, str] = {}
        queue = deque([start])
        loop: list[str] | None = None
        while queue and loop is None:
            node = queue.popleft()
            for nxt in edges[node]:
                assert nxt is not None  # `in states` above
                if nxt == start:
                    loop = [start]
                    while node != start:
                        loop.append(node)
                        node = parent[node]
                    loop = [start, *reversed(loop[1:]), start]
                    break
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        if loop is not None:
            found.append((start, loop))
            reported.update(loop)
    return found
