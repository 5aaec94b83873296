"""Reading what a user wrote, with positions: YAML (yamltree.py) and TOML (tomlpos.py). The
bytes come through smllm.files.read_regular, which opens only regular files."""
