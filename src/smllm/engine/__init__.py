"""The engine, sans-IO: `fire`, `view`, `stop` and the prompt hook as pure functions of the
loaded machines, the records read through a `Reader`, and a `Host` (clock, ids, commands,
prompt files). They return an `Outcome` (reply and writes) and never touch a store.

rules.py says what each place offers and checks params; fire.py maps each offered event to its
handler (`IDLE_HANDLERS`, `STATE_HANDLERS`, …); context.py holds the frozen per-call context;
moves.py builds accepted moves; builtins.py and enter.py are the built-in events; steps.py runs
guards and actions.
"""
