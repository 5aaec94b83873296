"""How a PostgreSQL store is named in messages, and what no message may show: its password,
raw or URL-escaped (issue 11 §3). Pure functions and URL checks: no server needed."""

from __future__ import annotations

import pytest

from smllm.errors import StoreError
from smllm.store.postgres import PostgresStore, describe_url, scrub


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://u:pw@db.example.com:6543/smllm", "db.example.com:6543"),
        ("postgres://u@db/smllm", "db"),
        ("postgresql://u:pw@[::1]:5432/x", "[::1]:5432"),
        ("postgresql:///smllm?host=/run/postgresql", "/run/postgresql"),
        ("postgresql:///smllm", "localhost"),
        ("postgresql://u:pw@h:99999/x", "the configured URL"),
    ],
)
def test_a_store_is_named_by_its_host(url: str, named: str) -> None:
    assert describe_url(url) == named
    assert PostgresStore(url, "team").name == f"the store at {named} (namespace team)"


def test_scrub_hides_the_password_in_both_forms() -> None:
    url = "postgresql://smllm:p%40ss%2Fw0rd@h/db"
    text = f"in {url}: p@ss/w0rd or p%40ss%2Fw0rd"
    assert scrub(text, url) == "in ***: *** or ***"
    # a URL too broken to parse still has its user:password part hidden
    broken = "postgresql://smllm:hunter2@h:port/db"
    assert "hunter2" not in scrub(f"bad: {broken} (hunter2)", broken)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "postgresql://smllm:Sec%21ret@127.0.0.1:1/db?foo=1",
            'the store URL is not valid: invalid URI query parameter: "foo"',
        ),
        (
            "postgresql://smllm:Sec ret@127.0.0.1:1/db",
            'the store URL is not valid: unexpected spaces found in "***", use '
            "percent-encoded spaces (%20) instead",
        ),
        (
            "postgresql://smllm:Secret@127.0.0.1:1/db?sslmode=bogus",
            'the store URL is not valid: invalid sslmode value: "bogus"',
        ),
        (
            "postgresql://smllm:Secret@127.0.0.1:abc/db",
            'the store URL is not valid: invalid integer value "abc" for connection option "port"',
        ),
    ],
)
def test_a_broken_url_is_named_without_its_password(url: str, message: str) -> None:
    with pytest.raises(StoreError) as caught:
        PostgresStore(url).instances(None, None)
    assert str(caught.value) == message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    "message",
    [
        'connection failed: connection to server at "db" (10.0.0.1), port 5432 failed: '
        "Network is unreachable\n\tIs the server running on that host?",
        'connection failed: connection to server at "10.231.0.1", port 54329 failed: '
        "Network is unreachable",
        'connection is bad: connection to server at "10.231.0.1", port 54329 failed: '
        "Network is unreachable",
    ],
)
def test_libpq_prefixes_are_cut_to_the_cause(message: str) -> None:
    from smllm.store.postgres import _reason

    assert _reason(Exception(message), "postgresql://u:pw@db/x") == "Network is unreachable"
