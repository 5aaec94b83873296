"""What a machine means to the engine, for comparing a machine with its compiled form."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from smllm.machine.loader.load import normalise_prompt
from smllm.machine.model import Action, Machine, Transition


def _prompt(action: Action) -> Action:
    """A prompt as the agent gets it: its text, wherever it came from."""
    if action.kind != "prompt":
        return action
    text = action.text
    if text is None:
        assert action.file is not None
        text = normalise_prompt(Path(action.file).read_text())
    return Action("prompt", text=text)


def meaning(machine: Machine) -> Any:
    """What the engine does with a machine, with prompt files read and file names dropped."""

    def actions(items: tuple[Action, ...]) -> tuple[Action, ...]:
        return tuple(_prompt(a) for a in items)

    def each(ts: tuple[Transition, ...]) -> tuple[Transition, ...]:
        return tuple(t._replace(actions=actions(t.actions)) for t in ts)

    states = {}
    for name, s in machine.states.items():
        entry = actions(s.entry)
        if s.implied_prompt is not None and os.path.exists(s.implied_prompt):
            text = normalise_prompt(Path(s.implied_prompt).read_text())
            entry = (*entry, Action("prompt", text=text))
        states[name] = s._replace(
            entry=entry,
            exit=actions(s.exit),
            implied_prompt=None,
            on={e: each(ts) for e, ts in s.on.items()},
            always=each(s.always),
        )
    shared = tuple(x._replace(entry=actions(x.entry), exit=actions(x.exit)) for x in machine.shared)
    return machine._replace(file="", states=states, shared=shared)
