"""Every PostgreSQL connection of smllm carries engine.md §10's settings, whatever the server
or role defaults say: a returned commit is durable, a writer waits 5 s at most, and a client
that vanished mid-transaction can't keep rows locked for hours."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from smllm.store.postgres import PostgresStore

EXPECTED = {
    "synchronous_commit": "on",
    "lock_timeout": "5s",
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "idle_in_transaction_session_timeout": "1min",
    "application_name": "smllm",
}


def settings(url: str, namespace: str) -> dict[str, str]:
    store = PostgresStore(url, namespace)
    try:
        store.instances(None, None)  # opens the connection
        conn: Any = store._conn
        return {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in EXPECTED}
    finally:
        store.close()


def test_the_settings_of_every_connection(pg_server: Any, pg_url: str, pg_namespace: str) -> None:
    # a role whose defaults would lose commits and wait for ever
    pg_server.psql("ALTER ROLE smllm SET synchronous_commit = off")
    pg_server.psql("ALTER ROLE smllm SET lock_timeout = 0")
    try:
        assert settings(pg_url, pg_namespace) == EXPECTED
    finally:
        pg_server.psql("ALTER ROLE smllm RESET ALL")


def test_the_urls_own_options_win(pg_url: str, pg_namespace: str) -> None:
    url = pg_url + "?options=" + quote("-c lock_timeout=1234")
    assert settings(url, pg_namespace) == {**EXPECTED, "lock_timeout": "1234ms"}
