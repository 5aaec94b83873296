"""A machine whose one event's guard takes a while (`sleep SECONDS`): long tool calls, cancels,
progress and the audit's commit time are tested on it."""

from __future__ import annotations

__all__ = ["slow_machine"]


def slow_machine(seconds: float) -> str:
    """The `slow` machine's text: task instances (ref param `taskId`), WORK → DONE on `checked`
    when `sleep SECONDS` exits 0, else WORK again."""
    return f"""\
id: slow
description: A guard that takes a while.
initial: WORK
meta:
  smllm: 1
  instance: {{ kind: task, ref: {{ param: taskId }} }}
  events:
    checked: {{ description: Fire after the check. }}
states:
  WORK:
    meta: {{ entryPoint: true }}
    entry: {{ type: prompt, params: {{ text: "Work, then fire checked." }} }}
    on:
      checked:
        - {{ target: DONE, guard: {{ type: command, params: {{ run: "sleep {seconds:g}" }} }} }}
        - {{ target: WORK, reenter: true }}
  DONE:
    type: final
    entry: {{ type: prompt, params: {{ text: "Done." }} }}
"""
