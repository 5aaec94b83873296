"""Machines: the format's types, reading machine files and configs, and checking them.

The rooms, each importing only those above it:
- summary.py, model.py, findings.py, regex.py: the types the engine reads (each machine's kind
  and store, a compiled `Machine`, `Loaded`), a finding, and the ECMA-262 regex dialect of
  the format;
- sources/: reading YAML and TOML with line and column positions (the bytes come through
  smllm.files.read_regular: never a FIFO, a socket or a device);
- checks/: the rules beyond shape: lint (derived warnings) and deep (prompt files, cwd);
- loader/: a machine file to a `Machine`: the shape checks against the JSON Schema of the
  format (schema.py, shape.py), params, actions, and the loader that runs them all (load.py);
- configs/: finding, reading and combining configs, and the compiled cache of a load;
- normal.py: the normal form that `smllm compile` writes.
"""
