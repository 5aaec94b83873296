"""Legality: what is offered where, and the checks of an event's params (engine.md §4.1, §5.0;
machine-format.md §2.4).

Rule 1: what each place offers is decided here (`machine_offers`, `GONE_OFFERS`, the idle
events of `idle.py`), and `fire`'s handler maps give each offered event of a place its handler;
every check that can refuse an event runs before that handler's first action.
Rule 2: this file knows no CLI, MCP, hook or store; it returns values (a refusal is a string).
"""

from __future__ import annotations

from ..jsontext import STRICT_JSON, dumps
from ..machine.model import Loaded, Machine, ParamSpec, State
from .records import Instance
from .reply import EventItem, EventsList, ParamLine

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "BUILTIN_DESCRIPTIONS",
    "GONE_OFFERS",
    "MACHINE_EVENT",
    "NOTE_PARAM",
    "STRICT_JSON",
    "check_params",
    "duplicate",
    "echo",
    "enter_params",
    "gone_events",
    "gone_note",
    "got",
    "machine_offers",
    "non_finite",
    "not_configured",
    "parse_json_text",
    "quoted",
    "state_events",
    "unconfigured_events",
]

#: agent-text.md §4: the built-ins' default descriptions (KIND LABEL / STATE filled in).
BUILTIN_DESCRIPTIONS = {
    "enter": "Start a new instance of a state machine, or continue one.",
    "resume": "Go back to {what} at {state}, which unmatched put aside.",
    "listPaused": "List all {count} paused instances.",
    "yield": "Stop for now and stay in {state}.",
    "pause": "Put {what} aside and return to idle.",
    "unmatched": "The request fits none of these; handle it from idle, then resume.",
    "unmatched-fallback": "The request fits none of these; handle it in {fallback}, then resume.",
}

#: engine.md §5.0: what an instance whose saved state is gone offers (§7.3)
GONE_OFFERS = ("pause", "unmatched")

#: the key of `fire.STATE_HANDLERS` for every event a machine declares under `on`
MACHINE_EVENT = "(machine event)"

NOTE_PARAM = ParamSpec(
    "note", False, True, None, None, "What you are waiting for.", {"type": "string"}, None, True
)


#: The most JSON text an event's params may hold in all. Params go into the reply, the
#: history record and the commands' environment (Linux caps one variable at 128 KiB), so a
#: megabyte of params is a mistake to refuse, not a record to keep.
MAX_PARAMS_BYTES = 64 * 1024


#: The deepest nesting of a param's value: JSON tools recurse per level (Python's json and
#: jsonschema fail near 1,000), and no real param nests past a few levels.
MAX_PARAMS_DEPTH = 64


def nests_too_deeply(value: Any) -> bool:
    """Whether `value` has lists or objects more than MAX_PARAMS_DEPTH levels deep."""
    level: list[Any] = [value]
    for _ in range(MAX_PARAMS_DEPTH):
        level = [
            v
            for item in level
            if isinstance(item, (dict, list))
            for v in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return any(isinstance(item, (dict, list)) for item in level)


def too_large(event: str, params: tuple[tuple[str, Any], ...]) -> str | None:
    """The refusal of params nested too deeply or whose JSON text exceeds MAX_PARAMS_BYTES."""
    if not params:
        return None
    if any(nests_too_deeply(v) for _, v in params):
        return f"{echo(event)} params nest more than {MAX_PARAMS_DEPTH} levels deep"
    try:
        size = len(dumps([list(p) for p in params], (", ", ": ")).encode("utf-8"))
    except ValueError:  # a non-finite number, which check_params refuses by its param
        return None
    if size <= MAX_PARAMS_BYTES:
        return None
    return f"{echo(event)} params are too large ({size} bytes of JSON; at most {MAX_PARAMS_BYTES})"


#: agent-text.md §9: a value echoed back in an error (a key, an event or param name, a value)
#: is cut to this many characters, `…` included
ECHO_LIMIT = 200


def echo(value: str) -> str:
    """A value from the caller as an error echoes it: at most ECHO_LIMIT characters."""
    return value if len(value) <= ECHO_LIMIT else value[: ECHO_LIMIT - 1] + "…"


def quoted(value: str) -> str:
    """A value inside `"…"`: `"` and `\\` escaped (agent-text.md §1)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def got(value: str) -> str:
    """A refused value as its error echoes it, `(got "VALUE")`: cut (echo), then quoted."""
    return f"(got {quoted(echo(value))})"


def duplicate(params: tuple[tuple[str, Any], ...]) -> str | None:
    seen: set[str] = set()
    for name, _ in params:
        if name in seen:
            return name
        seen.add(name)
    return None


def machine_offers(machine: Machine, state: State, instance: Instance, source: str) -> list[str]:
    """engine.md §5.0: the events offered in a (non-final) machine state, in offer order."""
    out = [e for e in state.on if source == "host" or machine.source(e) != "host"]
    if state.fallback and instance.resume_state is not None:
        out.append("resume")
    out += ["yield", "pause", "unmatched"]
    return out


def _builtin_description(machine: Machine | None, name: str, default: str) -> str:
    if machine is not None:
        ev = machine.events.get(name)
        if ev is not None and ev.description is not None:
            return ev.description
    return default


def param_line(spec: ParamSpec) -> ParamLine:
    return ParamLine(
        name=spec.name,
        required=spec.required,
        enum=spec.enum if spec.is_string else None,
        pattern=spec.pattern if spec.is_string else None,
        json=not spec.is_string,
        schema=spec.schema_shown,
        description=spec.description,
    )


def _event_description(machine: Machine, state: State, event: str) -> str | None:
    for t in state.on.get(event, ()):
        if t.description is not None:
            return t.description
    ev = machine.events.get(event)
    return ev.description if ev is not None else None


def state_events(
    machine: Machine,
    state: State,
    instance: Instance,
    session: str | None,
    only: tuple[str, ...] | None = None,
) -> EventsList:
    """The events list of a machine state (agent-text.md §4); `only` limits it (§7.2, §7.3)."""
    what = f"{machine.kind} {instance.label}"
    items: list[EventItem] = []
    names = list(only) if only is not None else machine_offers(machine, state, instance, "agent")
    for name in names:
        if name == "resume":
            text = BUILTIN_DESCRIPTIONS["resume"].format(what=what, state=instance.resume_state)
            items.append(EventItem(name, _builtin_description(machine, name, text)))
        elif name == "yield":
            # the load folded a paramDescriptions rewording of note into state.params
            note = state.params.get("yield", (NOTE_PARAM,))[0]
            text = BUILTIN_DESCRIPTIONS["yield"].format(state=state.name)
            items.append(
                EventItem(name, _builtin_description(machine, name, text), (param_line(note),))
            )
        elif name == "pause":
            text = BUILTIN_DESCRIPTIONS["pause"].format(what=what)
            items.append(EventItem(name, _builtin_description(machine, name, text)))
        elif name == "unmatched":
            if machine.fallback is not None and machine.fallback != state.name:
                text = BUILTIN_DESCRIPTIONS["unmatched-fallback"].format(fallback=machine.fallback)
            else:
                text = BUILTIN_DESCRIPTIONS["unmatched"]
            items.append(EventItem(name, _builtin_description(machine, name, text)))
        else:
            specs = state.params.get(name, ())
            items.append(
                EventItem(
                    name,
                    _event_description(machine, state, name),
                    tuple(param_line(p) for p in specs),
                )
            )
    return EventsList(session, tuple(items))


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"repeated object key {key!r}")
        out[key] = value
    return out


def non_finite(value: Any) -> float | None:
    """The first infinite or NaN float inside `value` (a library caller can hand one in)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and item - item != 0:
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def parse_json_text(text: str) -> tuple[bool, Any]:
    """Exactly one JSON value: NaN, Infinity and repeated object keys are rejected."""
    import json  # the hooks read this module: only a JSON param given as text needs json

    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, **STRICT_JSON)
    except ValueError as exc:
        return False, str(exc)
    except RecursionError:  # past what Python's json reads, so far past the limit too
        return False, f"it nests more than {MAX_PARAMS_DEPTH} levels deep"
    if nests_too_deeply(value):
        return False, f"it nests more than {MAX_PARAMS_DEPTH} levels deep"
    return True, value


def check_params(
    event: str,
    specs: tuple[ParamSpec, ...],
    defs: dict[str, Any] | None,
    given: tuple[tuple[str, Any], ...],
) -> tuple[str | None, dict[str, Any]]:
    """Check `given` against `specs` in the order of machine-format.md §2.4.

    Returns (refusal message or None, the checked params in declaration order).
    """
    name = duplicate(given)
    if name is not None:
        return f"{echo(event)} got param {echo(name)} more than once", {}
    by_name = {s.name: s for s in specs}
    # a null for a string param counts as absent; for a JSON param it is the value null
    values = {n: v for n, v in given if not (v is None and n in by_name and by_name[n].is_string)}
    if values and not specs:
        return f"{echo(event)} takes no params, but got {echo(next(iter(values)))}", {}
    for n in values:
        if n not in by_name:
            return f"{echo(event)} has no param {echo(n)} (params: {', '.join(by_name)})", {}
    for spec in specs:
        if spec.required and spec.name not in values:
            return f"{event} needs param {spec.name}", {}
    checked: dict[str, Any] = {}
    for spec in specs:
        if spec.name not in values:
            continue
        value = values[spec.name]
        where = f"{event} param {spec.name}"
        if spec.is_string:
            if not isinstance(value, str):
                return f"{where} must be a string", {}
            if spec.enum is not None and value not in spec.enum:
                return f"{where} must be one of: {', '.join(spec.enum)} {got(value)}", {}
            if spec.pattern is not None:
                from ..machine.regex import pattern_matches

                if not pattern_matches(spec.pattern, value):
                    return f"{where} must match {spec.pattern} {got(value)}", {}
            if not spec.plain:
                problem = _schema_problem(where, spec, defs, value)
                if problem:
                    return problem, {}
        else:
            if isinstance(value, str):
                ok, parsed = parse_json_text(value)
                if not ok:
                    return f"{where} must be a JSON value: {parsed}", {}
                value = parsed
            else:
                bad = non_finite(value)
                if bad is not None:
                    return f"{where} must be a JSON value: {bad} is not a JSON number", {}
            problem = _schema_problem(where, spec, defs, value)
            if problem:
                return problem, {}
        checked[spec.name] = value
    return None, checked


def _schema_problem(
    where: str, spec: ParamSpec, defs: dict[str, Any] | None, value: Any
) -> str | None:
    from ..machine.loader.params import json_param_errors

    sentences, more = json_param_errors(spec, defs, value)
    if not sentences:
        return None
    text = f"{where} doesn't match its schema. " + ". ".join(sentences)
    if more:
        text += f". And {more} more"
    return text


def not_configured(machine_id: str) -> str:
    """engine.md §7.2's refusal of every event but pause."""
    return (
        f"state machine {machine_id} is not configured (its file might have errors); fix "
        "the config, then fire any event: the session goes on where it was"
    )


def unconfigured_events(key: str | None, inst: Instance) -> EventsList:
    """§7.2: only pause, worded without the machine's kind."""
    return EventsList(
        key, (EventItem("pause", f"Put instance {inst.label} aside and return to idle."),)
    )


def gone_note(machine: Machine, inst: Instance) -> str:
    """§7.3's note when the held instance's saved state is gone."""
    return (
        f"Saved state {inst.state} no longer exists in {machine.id}. Fire pause, then "
        f"enter with a state: {', '.join(machine.states)}"
    )


def gone_events(machine: Machine, inst: Instance, key: str | None) -> EventsList:
    """§7.3: only pause and unmatched are offered."""
    gone = State(inst.state, False, False, False, (), (), {}, (), {}, None)
    return state_events(machine, gone, inst, key, only=GONE_OFFERS)


def enter_params(
    loaded: Loaded, given: tuple[tuple[str, Any], ...], source: str
) -> str | tuple[Machine, str | None, str | None, dict[str, str]]:
    """engine.md §5.1: whether `enter` may be fired with these params, by whom: a refusal's
    message, or (the machine named, the ref, the state, the params as the reply echoes them).
    The rest of enter (which instance, which state, the ref's pattern for a new one) is
    enter.py's: it depends on the store."""
    name = duplicate(given)
    if name is not None:
        return f"enter got param {echo(name)} more than once"
    # null and "" count as absent: an empty ref or state is how an agent leaves one out
    values = {n: v for n, v in given if v is not None and v != ""}
    machine_id = values.get("stateMachine")
    if machine_id is None:
        return "enter needs param stateMachine"
    if not isinstance(machine_id, str):
        return "enter param stateMachine must be a string"
    machine = loaded.machines.get(machine_id)
    if machine is None and not loaded.machines:
        # agent-text.md §9: the hint where a config exists; with none, `smllm init` first
        hint = "smllm new ID --write" if loaded.configs else "smllm init, then smllm new ID --write"
        return (
            "enter param stateMachine must name a configured state machine, and none is "
            f"configured {got(machine_id)}; add one with {hint}"
        )
    if machine is None:
        return (
            f"enter param stateMachine must be one of: {', '.join(loaded.machines)} "
            f"{got(machine_id)}"
        )
    ref_param = machine.ref.param
    for n, _v in given:
        if n not in ("stateMachine", ref_param, "state"):
            return (
                f"enter has no param {n} for {machine.id} (params: stateMachine, {ref_param}, "
                "state)"
            )
    for n in (ref_param, "state"):
        if n in values and not isinstance(values[n], str):
            return f"enter param {n} must be a string"
    if source == "agent" and machine.host_only():
        return (
            f"state machine {machine.id} needs a host to drive it: only the host fires its "
            f"events {', '.join(machine.host_events())}"
        )
    value: str | None = values.get(ref_param)
    state: str | None = values.get("state")
    params = {"stateMachine": machine_id}
    if value is not None:
        params[ref_param] = value
    if state is not None:
        params["state"] = state
    return machine, value, state, params
