"""The library API: the edge where the sans-IO engine meets the world.

`App` (app.py) owns every use case a surface offers (fire, view, stop, the prompt hook,
binding, and through `listing.py` the session, audit and instance listings): it loads the
configs through the compiled cache, runs the engine, commits the outcome to the stores
(stores.py opens them), and holds one call of a session at a time (calllock.py). The real
host (system.py) runs commands (processes.py) and reads prompt files. Surfaces (the CLI, and
later MCP and the hooks) parse, make one call here, and print.
"""
