"""`smllm graph [ID] [--mermaid | --dot | --json]` (cli-and-harnesses.md §2): the states and
transitions of the configured machines, read from the compiled machines."""

from __future__ import annotations

import json
import re
import sys

from ..machine.model import Guard, Machine, Transition
from .common import Exit, emit_json, report_load_errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace
    from typing import Any

__all__ = ["edges", "graph"]


def _guard(spec: Guard | None) -> str | None:
    if spec is None:
        return None
    if spec.kind == "visits":
        return f"visits {spec.state} ≥ {spec.at_least}"
    assert spec.command is not None
    run = spec.command.run
    return f"command `{run}`" if isinstance(run, str) else f"command [{', '.join(run)}]"


def edges(machine: Machine) -> list[tuple[str, str, Transition]]:
    """(source state, event, candidate) for every candidate, `always` named as its event."""
    out: list[tuple[str, str, Transition]] = []
    for name, state in machine.states.items():
        for event, candidates in state.on.items():
            out.extend((name, event, transition) for transition in candidates)
        out.extend((name, "always", transition) for transition in state.always)
    return out


def _tags(machine: Machine, name: str) -> list[str]:
    s = machine.states[name]
    tags = ["initial"] if name == machine.initial else []
    tags += ["entry point"] * s.entry_point + ["fallback"] * s.fallback + ["final"] * s.final
    return tags


def _marks(machine: Machine, event: str, transition: Transition) -> str:
    """` (reenter)`, ` (setRef)`, ` (host)`: what a candidate does besides its target."""
    host = event != "always" and machine.source(event) == "host"
    return " (reenter)" * transition.reenter + " (setRef)" * transition.set_ref + " (host)" * host


def _label(machine: Machine, event: str, transition: Transition) -> str:
    """An edge's label in the drawn forms: `EVENT [GUARD] (reenter) (setRef) (host)`."""
    guard = _guard(transition.guard)
    return event + (f" [{guard}]" if guard else "") + _marks(machine, event, transition)


def _text(machine: Machine) -> list[str]:
    lines = [f"{machine.id}: {machine.description}" if machine.description else machine.id]
    by_state: dict[str, list[tuple[str, Transition]]] = {}
    for source, event, transition in edges(machine):
        by_state.setdefault(source, []).append((event, transition))
    for name in machine.states:
        tags = _tags(machine, name)
        lines.append(f"{name} [{', '.join(tags)}]" if tags else name)
        for event, transition in by_state.get(name, []):
            guard = _guard(transition.guard)
            line = f"  {event}" + (f" [{guard}]" if guard else "")
            line += f" → {transition.target}" if transition.target is not None else " → (stays)"
            lines.append(line + _marks(machine, event, transition))
    return lines


_MERMAID_DIRECTION = re.compile(r"(direction)\s+(LR|RL|TB|BT)\b", re.IGNORECASE)


def _mermaid_label(text: str) -> str:
    """Label text Mermaid reads as text: no line ends (a CR is one too), no characters its
    grammar gives a meaning, and no `direction LR` or `%%` that its lexer would act on."""
    text = "".join(" " if c < " " or c == "\x7f" else c for c in text if c not in '"`:;#')
    return _MERMAID_DIRECTION.sub(r"\1_\2", text).replace("%%", "%")


def _mermaid(machine: Machine) -> list[str]:
    # every state gets an id s0, s1, … and its name as a label: names such as `note`, `a-b`
    # or `root_start` are keywords, bad ids or Mermaid's own ids for [*]
    ids = {name: f"s{i}" for i, name in enumerate(machine.states)}
    lines = ["---", f"title: {json.dumps(machine.id)}", "---", "stateDiagram-v2"]
    for name in machine.states:
        # [*] shows the initial and the final states; the other marks go in the label
        tags = [tag for tag in _tags(machine, name) if tag not in ("initial", "final")]
        label = _mermaid_label(name + (f" [{', '.join(tags)}]" if tags else ""))
        lines.append(f'    state "{label}" as {ids[name]}')
    lines.append(f"    [*] --> {ids[machine.initial]}")
    for source, event, transition in edges(machine):
        label = _mermaid_label(_label(machine, event, transition))
        lines.append(f"    {ids[source]} --> {ids[transition.target or source]} : {label}")
    lines += [f"    {ids[name]} --> [*]" for name, s in machine.states.items() if s.final]
    return lines


def _dot(machine: Machine) -> list[str]:
    def q(text: str) -> str:
        # a JSON string is a DOT ID: quotes escaped, a line break as \n
        return json.dumps(text, ensure_ascii=False)

    lines = [
        f"digraph {q(machine.id)} {{",
        "  rankdir=LR;",
        "  node [shape=box, style=rounded];",
        '  "__start" [shape=point];',
        f'  "__start" -> {q(machine.initial)};',
    ]
    for name, s in machine.states.items():
        shape = ", peripheries=2" if s.final else ""
        tags = _tags(machine, name)
        label = name + (f"\n[{', '.join(tags)}]" if tags else "")
        lines.append(f"  {q(name)} [label={q(label)}{shape}];")
    for source, event, transition in edges(machine):
        style = ", style=dashed" if event == "always" else ""
        label = q(_label(machine, event, transition))
        lines.append(f"  {q(source)} -> {q(transition.target or source)} [label={label}{style}];")
    lines.append("}")
    return lines


def _json(machine: Machine) -> dict[str, Any]:
    by_state: dict[str, list[dict[str, Any]]] = {name: [] for name in machine.states}
    for source, event, transition in edges(machine):
        by_state[source].append(
            {
                "event": event,
                "target": transition.target,
                "guard": _guard(transition.guard),
                "reenter": transition.reenter,
                "setRef": transition.set_ref,
                "source": "agent" if event == "always" else machine.source(event),
            }
        )
    return {
        "id": machine.id,
        "initial": machine.initial,
        "states": [
            {
                "name": name,
                "final": s.final,
                "entryPoint": s.entry_point,
                "fallback": s.fallback,
                "transitions": by_state[name],
            }
            for name, s in machine.states.items()
        ],
    }


def graph(args: Namespace) -> int:
    import os

    from ..machine.configs.cache import load_cached
    from ..machine.configs.config import find_configs
    from .common import config_option

    configs = find_configs(os.getcwd(), config_option(args))
    if not configs:
        from ..errors import NoConfig

        raise NoConfig()
    loaded = load_cached(configs)
    machines = list(loaded.machines.values())
    if args.id is not None:
        machines = [machine for machine in machines if machine.id == args.id]
        if not machines:
            from ..machine.configs.config import shown_path

            broken = sorted({shown_path(f.file) for f in loaded.findings if f.level == "error"})
            why = f" (with errors: {', '.join(broken)}; see smllm validate)" if broken else ""
            raise Exit(1, f"no machine {args.id} is configured{why}")
    report_load_errors(loaded)
    if args.json:
        emit_json({"machines": [_json(machine) for machine in machines]})
        return 0
    render = _mermaid if args.mermaid else _dot if args.dot else _text
    blocks = ["\n".join(render(machine)) for machine in machines]
    sys.stdout.write("\n\n".join(blocks) + "\n" if blocks else "")
    return 0
