"""Reading what a user wrote, with positions: YAML (yamltree.py), TOML (tomlpos.py), and the one
reader of a user-named file that opens only regular files (files.py)."""
