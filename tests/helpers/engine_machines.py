"""Small state machines (YAML text) that several engine test files run: `helpers.engine_worlds.
machines_world` writes each to a file named by its id."""

from __future__ import annotations

#: an action of every kind: shared actions before and after, entry and exit lists, a
#: transition's actions with setRef and a command in a sub-folder, prompts, a self transition
#: with reenter, and `always` candidates with a visits guard and a command guard
STEPS = """\
id: steps
description: Actions of every kind.
initial: A
meta:
  smllm: 1
  instance: { kind: job, ref: { param: jobId } }
  events:
    tag:
      description: Tag the job.
      params:
        type: object
        properties:
          jobId: { type: string, description: "The tag." }
          size: { type: integer, description: "How big." }
    note: { description: Run commands without moving. }
    route: { description: Through the router. }
    again: { description: Enter A again. }
  sharedActions:
    - states: [A, B]
      position: before
      entry: { type: command, params: { run: "shared before entry" } }
      exit: { type: command, params: { run: "shared before exit" } }
    - states: [B]
      entry: { type: command, params: { run: "shared after entry" } }
      exit: { type: command, params: { run: "shared after exit" } }
states:
  A:
    meta: { entryPoint: true }
    entry:
      - { type: command, params: { run: "a entry 0" } }
      - { type: command, params: { run: "a entry 1" } }
      - { type: prompt, params: { text: "In A." } }
    exit: { type: command, params: { run: "a exit" } }
    on:
      tag:
        target: B
        actions: [setRef, { type: command, params: { run: "tag action", cwd: sub } }]
      note:
        actions:
          - { type: command, params: { run: "note action" } }
          - { type: prompt, params: { text: "Noted." } }
      again: { target: A, reenter: true }
      route: R
  B:
    entry: { type: prompt, params: { text: "In B." } }
    on:
      route: R
  R:
    always:
      - { target: A, guard: { type: visits, params: { state: B, atLeast: 2 } } }
      - { target: B, guard: { type: command, params: { run: "test -f go" } } }
      - target: DONE
  DONE:
    type: final
"""


#: finished by an event with params, or at once by an `always` from entry point B
QUICK = """\
id: quick
description: Finished by an event with params, or at once from B.
initial: A
meta:
  smllm: 1
  instance: { kind: job, ref: { param: jobId } }
  events:
    finish:
      description: Finish.
      params: { type: object, properties: { summary: { type: string } } }
states:
  A:
    meta: { entryPoint: true }
    on:
      finish: DONE
  B:
    meta: { entryPoint: true }
    always: DONE
  DONE:
    type: final
"""
