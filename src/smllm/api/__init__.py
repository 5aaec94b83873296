"""The library API: the edge where the sans-IO engine meets the world.

`App` (app.py) owns every use case a surface offers (fire, view, stop, the prompt hook,
binding, and through `listing.py` the session, audit and instance listings): it loads the
configs through the compiled cache, runs the engine, commits the outcome to the stores
(stores.py opens them), and holds one call of a session at a time (calllock.py); sessions.py
reads and updates sessions outside a call (the prompt hook, the status line), and
saved_checks.py checks saved instances against their machines (validate's INS rules). The real
host (system.py) runs commands (processes.py) and reads prompt files. Surfaces (the CLI, the
MCP server, the hooks, and `smllm run`'s drive room) parse, make one call here, and print.
"""
