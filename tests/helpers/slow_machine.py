"""A machine whose one event's guard takes a while (`sleep SECONDS`): long tool calls, cancels,
progress and the audit's commit time are tested on it."""

from __future__ import annotations

__all__ = ["slow_machine"]


def slow_machine(seconds: float, run: str | None = None, timeout_secs: int | None = None) -> str:
    """The `slow` machine's text: task instances (ref param `taskId`), WORK → DONE on `checked`
    when the guard exits 0 (`sleep SECONDS`, or RUN), else WORK again; TIMEOUT_SECS, the
    guard's `timeoutSecs`, when given."""
    command = run if run is not None else f"sleep {seconds:g}"
    limit = f", timeoutSecs: {timeout_secs}" if timeout_secs is not None else ""
    guard = f"{{ type: command, params: {{ run: '{command}'{limit} }} }}"
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
        - {{ target: DONE, guard: {guard} }}
        - {{ target: WORK, reenter: true }}
  DONE:
    type: final
    entry: {{ type: prompt, params: {{ text: "Done." }} }}
"""
