"""Stores: the `InstanceStore` and `SessionStore` interfaces (base.py), the embedded SQLite
backend (sqlite.py), PostgreSQL for a team (postgres.py), and the broker that keeps one
PostgreSQL connection for the stop hooks (broker.py; the hooks' side in brokered.py). A store
applies the engine's writes, versioned and atomic, and holds no domain logic (session merging
lives with the records, in engine/records.py).
"""
