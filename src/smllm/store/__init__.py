"""Stores: the `InstanceStore` and `SessionStore` interfaces (base.py) and the embedded SQLite
backend (sqlite.py). A store applies the engine's writes, versioned and atomic, and holds no
domain logic (session merging lives with the records, in engine/records.py).
"""
