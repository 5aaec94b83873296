"""Configs: finding, reading and combining them into one `Loaded` set (config.py), and the
compiled cache that keeps the hook path free of YAML (cache.py)."""
