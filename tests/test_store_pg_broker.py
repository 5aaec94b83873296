"""The stop hook of a PostgreSQL project reads through the store's broker (issue 20 §7,
store/brokered.py and store/broker.py), on the real test server: a brokered stop answers
byte for byte as a direct one and imports no psycopg; a takeover or a pause from another host
is seen by the very next stop; commands and the other hooks start no broker; a socket path
too long for the kernel means reading directly. The broker's life (dead, stale, idle, another
version's, the server down, its secrets): test_store_pg_broker_life.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from helpers.hook_runs import block_text, held, hook, payload
from helpers.imported_modules import slow
from helpers.store_brokers import (
    clear,
    is_broker,
    logged_pids,
    stop,
    traced_stop,
    warm,
)

from smllm.store.brokered import ENV_SWITCH

# -- the tests -----------------------------------------------------------------------------------


def test_a_brokered_stop_answers_as_a_direct_one(
    pg: Path, env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    key = held("claude", pg, env)
    assert not runtime.exists()  # session start and fire read directly: no broker
    direct = stop(pg, {**env, ENV_SWITCH: "0"})  # brokers off: today's path
    assert (direct.code, direct.err) == (0, ""), direct
    assert json.loads(direct.out)["reason"] == block_text(key)
    assert not runtime.exists()
    clear(pg, env)

    out, pid, _ = warm(pg, env, runtime)  # no broker yet: read directly, one started
    assert out == direct.out
    ran, names = traced_stop(pg, env, tmp_path / "m.txt")

    assert (ran.code, ran.out, ran.err) == (0, direct.out, "")
    assert "smllm.store.brokered" in names  # the test can fail
    assert not {"psycopg", "smllm.store.postgres", "smllm.store.broker"} & names
    assert not {"socket", "hashlib", "_hashlib"} & names  # _socket and _blake2 alone
    assert is_broker(pid)
    clear(pg, env)
    body = json.dumps(payload("claude", "h1", pg, stop_hook_active=False))
    assert slow(["harness", "hook", "claude", "stop"], pg, env, tmp_path, stdin=body) == []

    # a yielded session's stop reads its holder through the broker too
    assert smllm(["fire", "--session", key, "yield"], pg, env).code == 0
    ran, names = traced_stop(pg, env, tmp_path / "y.txt")
    assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    assert "psycopg" not in names
    # and the other hooks read directly, as before
    ran = hook("claude", "session-start", payload("claude", "h1", pg), pg, env)
    assert ran.code == 0 and "dev › PLAN · issue GH-1" in ran.out, ran
    assert logged_pids(runtime) == [pid]


def other_host(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The environment of another machine on the same store: its own user store and caches."""
    other = tmp_path / "other-host"
    return {
        **env,
        "XDG_STATE_HOME": str(other / "state"),
        "XDG_CACHE_HOME": str(other / "cache"),
        "XDG_RUNTIME_DIR": str(other / "run"),
        "HOME": str(other / "home"),
    }


@pytest.mark.parametrize("change", ["takeover", "pause"])
def test_another_hosts_change_is_seen_by_the_next_stop(
    pg: Path, env: dict[str, str], runtime: Path, tmp_path: Path, change: str
) -> None:
    """Another host's session takes the issue over (and pauses it): the very next stop here,
    answered by a broker that has served stops before, says so; its reads (the instance, then
    the paused list of the idle block) all went through the broker."""
    held("claude", pg, env)
    before, pid, _ = warm(pg, env, runtime)
    ran, names = traced_stop(pg, env, tmp_path / "warm.txt")
    assert ran.out == before and "psycopg" not in names
    clear(pg, env)

    there = other_host(env, tmp_path)
    enter = ["fire", "enter", "--param", "stateMachine=dev", "--param", "issueId=GH-1", "--json"]
    ran = smllm(enter, pg, there)
    assert ran.code == 0, ran
    other = json.loads(ran.out)["session"]
    message = f"issue GH-1 moved to session {other}; you are in idle"
    if change == "pause":
        assert smllm(["fire", "--session", other, "pause"], pg, there).code == 0
        message = "issue GH-1 is paused; you are in idle"

    ran, names = traced_stop(pg, env, tmp_path / "next.txt")

    assert ran.code == 0, ran
    reason = json.loads(ran.out)["reason"]
    assert message in reason, reason
    if change == "pause":
        assert "GH-1" in reason.split(message, 1)[1]  # listed among the paused
    assert "psycopg" not in names  # the broker answered, with the rows as they are now
    assert stop(pg, env).out == "{}\n"  # in idle now
    assert is_broker(pid)


def test_a_socket_path_too_long_means_reading_directly(
    pg: Path, env: dict[str, str], runtime: Path, tmp_path: Path
) -> None:
    """A runtime folder so deep that the socket's path would pass 103 bytes: no broker, the
    stop reads directly and answers as ever."""
    deep = runtime.parent / ("d" * 100)
    deep.mkdir()
    env["XDG_RUNTIME_DIR"] = str(deep)
    key = held("claude", pg, env)
    ran, names = traced_stop(pg, env, tmp_path / "m.txt")
    assert json.loads(ran.out)["reason"] == block_text(key)
    assert "psycopg" in names
    assert not (deep / "smllm").exists()


def test_only_a_stop_opens_brokered_stores(pg_url: str, pg_namespace: str) -> None:
    """`brokered()` is the stop's alone: outside it (commands, smllm mcp, the library) a
    PostgreSQL store is read directly."""
    from smllm.api.stores import brokered, open_store
    from smllm.machine.summary import StoreSpec
    from smllm.store.brokered import BrokeredStore
    from smllm.store.postgres import PostgresStore

    spec = StoreSpec("url", pg_url, pg_namespace)
    stores: list[Any] = [open_store(spec)]
    with brokered():
        stores.append(open_store(spec))
        with brokered():
            stores.append(open_store(spec))
        stores.append(open_store(spec))
    stores.append(open_store(spec))
    assert [type(s) for s in stores] == [PostgresStore, *[BrokeredStore] * 3, PostgresStore]
    assert (
        stores[1].name
        == stores[0].name
        == f"the store at {stores[0].host} (namespace " + (f"{pg_namespace})")
    )
