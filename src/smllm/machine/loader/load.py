"""Loading one machine file: YAML → shape checks → structure checks → a `Machine`.

A file with any error gives no machine, only findings, each at `file:line:col` of the node.
Structure rules (MCH, EVT, AGT) run only once the shape is valid (validation.md §1).
"""

from __future__ import annotations

import os
import re
from typing import Any

from ...recordclass import Record
from ..findings import Finding, Path_
from ..model import (
    BUILTIN_EVENTS,
    Action,
    EventDef,
    Machine,
    ParamSpec,
    RefSpec,
    Shared,
    State,
    Transition,
)
from .actions import ActionReader, normalise_prompt
from .params import env_name, read_params, ref_param_spec

__all__ = ["LoadResult", "load_machine_file", "load_machine_source", "normalise_prompt"]


class LoadResult(Record):
    machine: Machine | None
    findings: list[Finding]
    top_id: str | None  # the file's top-level `id:`, even when it has errors (CFG-8)
    reads: tuple[str, ...] = ()  # prompt files and folders the checks read or looked for
    data: dict[str, Any] | None = None  # the file's data, for `compile`
    id_at: tuple[int, int] | None = None  # line and column of the `id` value (CFG-4/5/6)


def load_machine_file(path: str, shown: str) -> LoadResult:
    """Load the machine file at absolute `path`; findings name it `shown`."""
    from ...files import MISSING, read_regular

    source, problem = read_regular(path)  # never opens a FIFO or a device
    if source is None:
        reason = "No such file or directory" if problem == MISSING else problem
        return LoadResult(
            None,
            [
                Finding.make(
                    "FMT-1",
                    shown,
                    f"can't read the file: {reason}",
                    hint="check the path and that smllm may read it",
                )
            ],
            None,
        )
    return load_machine_source(source, path, shown)


def load_machine_source(source: bytes | str, path: str, shown: str) -> LoadResult:
    from ..sources.yamltree import YamlError, load_yaml

    try:
        doc = load_yaml(source)
    except YamlError as exc:
        line, col = (exc.pos.line, exc.pos.col) if exc.pos else (None, None)
        return LoadResult(
            None,
            [Finding.make("FMT-1", shown, f"not valid YAML: {exc.reason}", line=line, col=col)],
            _top_id_line(source),
        )
    builder = _Builder(doc, path, shown)
    machine = builder.build()
    top = builder.data.get("id")
    top_id = top if isinstance(top, str) else None
    at = doc.value_pos.get(("id",))
    id_at = (at.line, at.col) if at is not None else None
    return LoadResult(machine, builder.findings, top_id, tuple(builder.reads), builder.data, id_at)


_TOP_ID = re.compile(r"""^id:[ \t]*["']?([A-Za-z0-9_-]+)["']?[ \t]*(?:#.*)?$""", re.M)


def _top_id_line(source: bytes | str) -> str | None:
    """The `id:` line of a file that isn't valid YAML, for CFG-8."""
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    match = _TOP_ID.search(text.removeprefix("\ufeff"))  # a byte order mark starts no line
    return match.group(1) if match else None


class _Builder(ActionReader):
    def __init__(self, doc: Any, path: str, shown: str) -> None:
        self.doc = doc
        from .shape import without_nulls

        self.data: dict[str, Any] = without_nulls(doc.data)
        self.path = path
        self.dir = os.path.dirname(path)
        self.shown = shown
        self.findings: list[Finding] = []
        self.prompts: list[tuple[Path_, Action]] = []  # for the checks of deep.py
        self.cwds: list[tuple[Path_, str]] = []
        self.reads: list[str] = []  # files and folders those checks read or looked for
        self.error_at: list[tuple[str, Path_]] = []  # (rule, path) of each error, for lint

    # -- findings -----------------------------------------------------------------------------

    def pos(self, path: Path_, at_key: bool = False) -> tuple[int | None, int | None]:
        table = self.doc.key_pos if at_key else self.doc.value_pos
        probe = path
        while True:
            hit = table.get(probe) or self.doc.value_pos.get(probe)
            if hit is not None:
                return hit.line, hit.col
            if not probe:
                return None, None
            probe = probe[:-1]

    def add(
        self, rule: str, path: Path_, message: str, *, at_key: bool = False, hint: str | None = None
    ) -> None:
        line, col = self.pos(path, at_key)
        finding = Finding.make(rule, self.shown, message, path=path, line=line, col=col, hint=hint)
        self.findings.append(finding)
        if finding.level == "error":
            self.error_at.append((rule, path))

    def errors(self) -> bool:
        return any(f.level == "error" for f in self.findings)

    # -- build --------------------------------------------------------------------------------

    def build(self) -> Machine | None:
        from .schema import machine_schema
        from .shape import check_shape, non_finite

        for dup in self.doc.duplicates:
            self.findings.append(
                Finding.make(
                    "FMT-2",
                    self.shown,
                    f"{dup.path[-1]} is repeated (first at line {dup.first_line})",
                    path=dup.path,
                    line=dup.pos.line,
                    col=dup.pos.col,
                )
            )
        infinite = non_finite(self.data)
        for where in infinite:
            name = next((p for p in reversed(where) if isinstance(p, str)), "the value")
            self.add("FMT-5", where, f"{name} must be a finite number (JSON has no .inf or .nan)")
        for issue in check_shape(machine_schema(), self.data):
            if issue.path in infinite:
                continue
            rule, message = issue.rule, issue.message
            if issue.path[:2] == ("meta", "events") and issue.path[-1:] == ("source",):
                rule, message = "EVT-11", "source must be agent or host"
            self.add(rule, issue.path, message, at_key=issue.at_key)
        if self.errors():
            return None
        return self.structure()

    def structure(self) -> Machine | None:
        data = self.data
        meta = data["meta"]
        inst = meta.get("instance") or {}
        ref = inst.get("ref") or {}
        ref_spec = RefSpec(ref.get("param") or "ref", ref.get("pattern"), ref.get("description"))
        if ref_spec.param in ("stateMachine", "state"):
            self.add(
                "EVT-6",
                ("meta", "instance", "ref", "param"),
                f"the ref param can't be named {ref_spec.param}",
            )
        if ref_spec.pattern is not None:
            self.check_pattern(ref_spec.pattern, ("meta", "instance", "ref", "pattern"))
        states_data: dict[str, Any] = data["states"]
        names = list(states_data)
        self.state_names = names
        if data["initial"] not in states_data:
            self.add(
                "MCH-1",
                ("initial",),
                f"initial state {data['initial']} doesn't exist",
                hint="name one of: " + ", ".join(names),
            )
        events = self.read_events(meta.get("events") or {})
        shared = self.read_shared(meta.get("sharedActions") or [])
        states: dict[str, State] = {}
        for name, sdata in states_data.items():
            states[name] = self.read_state(name, sdata or {}, events, ref_spec)
        fallbacks = [s.name for s in states.values() if s.fallback]
        for extra in fallbacks[1:]:
            self.add(
                "MCH-7",
                ("states", extra, "meta", "fallback"),
                f"{extra} is also a fallback state (first: {fallbacks[0]})",
            )
        if fallbacks and states[fallbacks[0]].final:
            self.add(
                "MCH-7",
                ("states", fallbacks[0], "meta", "fallback"),
                "the fallback state can't be final",
            )
        from ..checks.lint import always_loops

        for start, loop in always_loops(states):
            self.add(
                "MCH-4", ("states", start, "always"), "always transitions loop: " + " → ".join(loop)
            )
        machine = Machine(
            id=data["id"],
            description=data.get("description"),
            initial=data["initial"],
            kind=inst.get("kind") or "instance",
            ref=ref_spec,
            events=events,
            states=states,
            shared=shared,
            file=self.path,
            fallback=fallbacks[0] if fallbacks else None,
        )
        from ..checks.deep import check_files
        from ..checks.lint import Broken, lint

        # every finding at once (validation.md §1): the warnings run on a machine with errors
        # too, each skipping the parts an error touches (see Broken), so that a broken part
        # gives neither a guess nor a second finding of the same mistake
        broken = Broken(self.error_at)
        lint(machine, data, self.add, broken)
        self.reads = check_files(machine, self.prompts, self.cwds, self.add, broken)
        return None if self.errors() else machine

    def check_pattern(self, pattern: str, path: Path_) -> None:
        from ..regex import PatternError, compile_pattern

        try:
            compile_pattern(pattern)
        except PatternError as exc:
            self.add("EVT-2", path, f"bad pattern {pattern}: {exc.reason}")

    def read_events(self, data: dict[str, Any]) -> dict[str, EventDef]:
        out: dict[str, EventDef] = {}
        for name, edata in data.items():
            edata = edata or {}
            path: Path_ = ("meta", "events", name)
            if name in BUILTIN_EVENTS:
                for key in ("params", "source"):
                    if edata.get(key) is not None:
                        self.add(
                            "AGT-2",
                            (*path, key),
                            f"built-in event {name} can only get a description",
                            hint=f"remove {key}; smllm fixes the params and source of built-ins",
                        )
            specs: tuple[ParamSpec, ...] = ()
            defs = None
            if edata.get("params") is not None and name not in BUILTIN_EVENTS:
                specs, defs, problems = read_params(edata["params"])
                for problem in problems:
                    where = (*path, "params", *problem.path)
                    self.add(problem.rule, where, problem.message, at_key=problem.at_key)
                seen: dict[str, str] = {}
                for spec in specs:
                    env = env_name(spec.name)
                    if env in seen:
                        self.add(
                            "EVT-4",
                            (*path, "params", "properties", spec.name),
                            f"params {seen[env]} and {spec.name} both become SMLLM_PARAM_{env}",
                        )
                    seen[env] = spec.name
            out[name] = EventDef(
                name, edata.get("description"), edata.get("source") or "agent", specs, defs
            )
        return out

    def read_shared(self, data: list[Any]) -> tuple[Shared, ...]:
        out = []
        for index, entry in enumerate(data):
            path: Path_ = ("meta", "sharedActions", index)
            states = entry.get("states") or []
            if not states:
                self.add("MCH-12", (*path, "states"), "states must name at least one state")
            for i, state in enumerate(states):
                if state not in self.state_names:
                    self.add(
                        "MCH-12",
                        (*path, "states", i),
                        f"no state named {state}",
                    )
            if entry.get("entry") is None and entry.get("exit") is None:
                self.add("MCH-12", path, "a sharedActions entry needs entry or exit")
            out.append(
                Shared(
                    number=index,
                    states=frozenset(states),
                    before=entry.get("position") == "before",
                    entry=self.read_actions(entry.get("entry"), (*path, "entry"), allow_ref=False),
                    exit=self.read_actions(entry.get("exit"), (*path, "exit"), allow_ref=False),
                )
            )
        return tuple(out)

    def read_state(
        self, name: str, data: dict[str, Any], events: dict[str, EventDef], ref: RefSpec
    ) -> State:
        path: Path_ = ("states", name)
        meta = data.get("meta") or {}
        final = data.get("type") == "final"
        for key in ("on", "always"):
            if final and data.get(key) is not None:
                self.add(
                    "MCH-6",
                    (*path, key),
                    f"final state {name} can't have {key}",
                    hint=f"remove {key}, or drop type: final",
                )
        entry = self.read_actions(data.get("entry"), (*path, "entry"), allow_ref=False)
        exit_ = self.read_actions(data.get("exit"), (*path, "exit"), allow_ref=False)
        on: dict[str, tuple[Transition, ...]] = {}
        for event, tdata in (data.get("on") or {}).items():
            if event in BUILTIN_EVENTS:
                self.add("EVT-5", (*path, "on", event), f"{event} is a built-in event", at_key=True)
                continue
            on[event] = self.read_transitions(tdata, (*path, "on", event), event, name)
        always: tuple[Transition, ...] = ()
        if data.get("always") is not None:
            always = self.read_transitions(data["always"], (*path, "always"), "always", name)
            for index, t in enumerate(always):
                if t.target is None or t.target == name:
                    self.add(
                        "MCH-5",
                        self.candidate_path((*path, "always"), data["always"], index),
                        "an always transition must lead to another state",
                        hint=f"give it a target other than {name}",
                    )
        params: dict[str, tuple[ParamSpec, ...]] = {}
        for event, candidates in on.items():
            ev = events.get(event)
            declared = ev.params if ev else ()
            if any(t.set_ref for t in candidates):
                own = next((p for p in declared if p.name == ref.param), None)
                if own is None:
                    declared = (
                        *declared,
                        ref_param_spec(ref.param, ref.pattern, ref.description, True),
                    )
                elif not own.is_string:
                    self.add(
                        "EVT-8",
                        ("meta", "events", event, "params", "properties", ref.param),
                        f"the ref param {ref.param} of {event} must be a string param",
                    )
            params[event] = declared
        descs = meta.get("paramDescriptions") or {}
        for event, pdescs in descs.items():
            if event == "yield":
                taken = ["note"]
            elif event in on:
                taken = [p.name for p in params[event]]
            else:
                self.add(
                    "EVT-9",
                    (*path, "meta", "paramDescriptions", event),
                    f"{name} doesn't offer {event}",
                    at_key=True,
                )
                continue
            for pname in pdescs:
                if pname not in taken:
                    self.add(
                        "EVT-9",
                        (*path, "meta", "paramDescriptions", event, pname),
                        f"{event} has no param {pname}",
                        at_key=True,
                    )
        if isinstance(descs.get("yield"), dict) and "note" in descs["yield"]:
            params["yield"] = (ref_param_spec("note", None, descs["yield"]["note"], False),)
        for event, specs in params.items():
            rewords = descs.get(event) or {}
            if rewords:
                params[event] = tuple(
                    s._replace(description=rewords.get(s.name, s.description)) for s in specs
                )
        has_prompt = any(a.kind == "prompt" for a in entry)
        implied = (
            None if has_prompt else os.path.join(os.path.dirname(self.path), f"enter-{name}.md")
        )
        return State(
            name=name,
            final=final,
            entry_point=bool(meta.get("entryPoint")),
            fallback=bool(meta.get("fallback")),
            entry=entry,
            exit=exit_,
            on=on,
            always=always,
            params=params,
            implied_prompt=implied,
        )

    @staticmethod
    def candidate_path(path: Path_, data: Any, index: int) -> Path_:
        return (*path, index) if isinstance(data, list) else path

    def read_transitions(
        self, data: Any, path: Path_, event: str, source: str
    ) -> tuple[Transition, ...]:
        items = data if isinstance(data, list) else [data]
        out = []
        for index, item in enumerate(items):
            ipath = self.candidate_path(path, data, index)
            if isinstance(item, str):
                item = {"target": item}
            target = item.get("target")
            if target is not None and target not in self.state_names:
                self.add(
                    "MCH-2",
                    (*ipath, "target") if (*ipath, "target") in self.doc.value_pos else ipath,
                    f"no state named {target}",
                    hint="name one of: " + ", ".join(self.state_names),
                )
            guard = None
            if item.get("guard") is not None:
                guard = self.read_guard(item["guard"], (*ipath, "guard"))
            actions = self.read_actions(
                item.get("actions"), (*ipath, "actions"), allow_ref=event != "always"
            )
            out.append(
                Transition(
                    target, guard, actions, bool(item.get("reenter")), item.get("description")
                )
            )
        if out and out[-1].guard is not None:
            last = self.candidate_path(path, data, len(items) - 1)
            example = f"{{ target: {source}, reenter: true }}"
            self.add(
                "MCH-3",
                (*last, "guard"),
                f"the last candidate of {event} has a guard",
                hint="add an unguarded last candidate, e.g. "
                + ("one that leads to another state" if event == "always" else example),
            )
        return tuple(out)
