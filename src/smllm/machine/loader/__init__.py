"""From a machine file to a compiled `Machine`: the format's JSON Schema (schema.py) and the
shape checks that use it (shape.py), params (params.py), guards and actions (actions.py), and
the loader that runs them in order and collects findings (load.py)."""
