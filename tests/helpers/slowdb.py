"""A test-only hook that slows SQLite and PostgreSQL transactions down, in the helper process
only.

`install_from_env()` reads `SMLLM_TEST_SLOWDB` (JSON) and, when it is set, makes every
`sqlite3.connect` (and `_sqlite3.connect`, which smllm calls) in this process return a
`SlowConnection`, which sleeps at the points where
a kill or a concurrent writer matters and reports where it is in a phase file:

- `wait-begin:STORE`: before `BEGIN IMMEDIATE` (for the user store: between the instance commit
  and the session commit of a call);
- `in-tx:STORE`: inside the transaction, before each write and before `COMMIT`;
- `committing:STORE` while `COMMIT` runs, `committed:STORE` after it.

STORE is `user` for user.db and `instance` for any other database. Settings:
`seed` (int), `max_ms` (each sleep is uniform in [0, max_ms]), `user_begin_ms` (an extra fixed
sleep before the user store's `BEGIN`), `phase` (the phase file, or null), `stall` (a phase at
which the process stops for a minute the first time it gets there, to be killed there),
`release` (a file: a stall ends as soon as it exists, so the test can act on the stalled
process from outside and then let it go on).

Where psycopg is installed, `psycopg.connect` (which smllm's PostgreSQL store calls) makes a
`SlowPgConnection` with the same phases, STORE always `instance`: `wait-begin` before the
explicit `BEGIN` of a commit, `in-tx` before each statement inside a transaction (also the one
that makes smllm's schema, which begins implicitly), `committing`/`committed` around `COMMIT`.

Nothing in src/ knows about this: the helpers install it before they import smllm's stores.
"""

from __future__ import annotations

import functools
import json
import os
import random
import sqlite3
import time
from typing import Any

ENV = "SMLLM_TEST_SLOWDB"
PHASE_WIDTH = 40

_phase_fd: int | None = None
_stall: str | None = None
_release: str | None = None


def set_phase(text: str) -> None:
    """Record where this process is, for the test that kills it to read."""
    global _stall
    if _phase_fd is not None:
        os.pwrite(_phase_fd, text.encode()[:PHASE_WIDTH].ljust(PHASE_WIDTH), 0)
    if _stall is not None and text == _stall:
        _stall = None
        end = time.monotonic() + 60
        while time.monotonic() < end and not (_release and os.path.exists(_release)):
            time.sleep(0.005)


def read_phase(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(PHASE_WIDTH).decode(errors="replace").strip()
    except OSError:
        return ""


class SlowConnection(sqlite3.Connection):
    rng: random.Random = random.Random(0)
    max_ms: float = 0.0
    user_begin_ms: float = 0.0

    def __init__(self, database: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        self.store = "user" if os.path.basename(str(database)) == "user.db" else "instance"

    def _nap(self) -> None:
        if self.max_ms > 0:
            time.sleep(self.rng.uniform(0, self.max_ms) / 1000)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head == "BEGIN":
            set_phase(f"wait-begin:{self.store}")
            if self.store == "user" and self.user_begin_ms > 0:
                time.sleep(self.user_begin_ms / 1000)
            self._nap()
            cur = super().execute(sql, parameters)
            set_phase(f"in-tx:{self.store}")
            return cur
        if head in ("INSERT", "UPDATE", "DELETE") and self.in_transaction:
            self._nap()
            return super().execute(sql, parameters)
        if head == "COMMIT":
            self._nap()
            set_phase(f"committing:{self.store}")
            cur = super().execute(sql, parameters)
            set_phase(f"committed:{self.store}")
            return cur
        return super().execute(sql, parameters)


def _install_postgres(rng: random.Random, max_ms: float) -> None:
    """Make `psycopg.connect` return connections that nap and report phases (see top)."""
    try:
        import psycopg
    except ImportError:
        return
    from psycopg.pq import TransactionStatus

    def nap() -> None:
        if max_ms > 0:
            time.sleep(rng.uniform(0, max_ms) / 1000)

    class SlowPgConnection(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            text = query if isinstance(query, str) else ""
            head = text.lstrip().split(None, 1)[0].upper() if text.strip() else ""
            if head == "BEGIN":
                set_phase("wait-begin:instance")
                nap()
                cur = super().execute(query, params, **kwargs)
                set_phase("in-tx:instance")
                return cur
            if head == "COMMIT":
                nap()
                set_phase("committing:instance")
                cur = super().execute(query, params, **kwargs)
                set_phase("committed:instance")
                return cur
            if self.info.transaction_status == TransactionStatus.INTRANS:
                set_phase("in-tx:instance")
                if head in ("INSERT", "UPDATE", "DELETE", "CREATE"):
                    nap()
            return super().execute(query, params, **kwargs)

    psycopg.connect = SlowPgConnection.connect  # type: ignore[assignment]


def install_from_env() -> bool:
    """Install the hook when `SMLLM_TEST_SLOWDB` is set; True when installed."""
    global _phase_fd, _stall, _release
    raw = os.environ.get(ENV)
    if not raw:
        return False
    settings: dict[str, Any] = json.loads(raw)
    SlowConnection.rng = random.Random(settings.get("seed", 0))
    SlowConnection.max_ms = float(settings.get("max_ms", 0))
    SlowConnection.user_begin_ms = float(settings.get("user_begin_ms", 0))
    _stall = settings.get("stall")
    _release = settings.get("release")
    phase = settings.get("phase")
    if phase:
        _phase_fd = os.open(phase, os.O_RDWR | os.O_CREAT, 0o644)
    original = sqlite3.connect
    slow = functools.partial(original, factory=SlowConnection)
    sqlite3.connect = slow  # type: ignore[assignment]
    # smllm's store connects through the C module `_sqlite3` (the package's `connect` is the
    # same function, re-exported): slow that one too
    import _sqlite3

    _sqlite3.connect = slow
    _install_postgres(random.Random(settings.get("seed", 0) + 1), SlowConnection.max_ms)
    return True
