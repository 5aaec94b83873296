"""The PostgreSQL instance store under bad conditions (issue 11, engine.md §10), through the real
CLI against the real test server (conftest's `pg_server`): a server stopped or restarted, a
wrong password, URLs with typos, `url-env` unset, a statement timeout, a connection dropped in
the middle of a commit, a row lock held past 5 s, a schema newer than smllm, and two projects
sharing one database in two namespaces.

Every command's stdout and stderr (also with `--json`, and with SMLLM_DEBUG=1's tracebacks), and
every file smllm wrote (the user store's sessions and audit, the project), are searched for the
server's password, raw and URL-escaped: it must appear nowhere (`Seen`).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from conftest import ROOT, Ran, enter_args, smllm, use_postgres
from helpers.pgserver import PASSWORD, free_port
from helpers.slowdb import read_phase
from helpers.storerows import StoreRows, fresh_database, host, lock_row

from smllm.cli.demo import copy_example

#: the password as it may leak: raw, URL-escaped (as in the URL), escaped the other common way
SECRETS = sorted({PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD)})
HOOK_STOP = {"session_id": "h1", "stop_hook_active": False}


# -- the password appears nowhere --------------------------------------------------------------


class Seen:
    """Runs the CLI and keeps everything it printed, to be searched for the password."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def run(self, args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None) -> Ran:
        ran = smllm(args, cwd, env, stdin=stdin, timeout=60)
        self.texts += [ran.out, ran.err]
        return ran

    def hook(self, which: str, body: dict[str, Any], cwd: Path, env: dict[str, str]) -> Ran:
        payload = {"cwd": str(cwd), **body}
        return self.run(["harness", "hook", "claude", which], cwd, env, stdin=json.dumps(payload))

    def check(self, env: dict[str, str], *folders: Path) -> None:
        """No secret in any output so far, in the user store's rows, or in any file under the
        state home and FOLDERS."""
        texts = list(self.texts)
        user_db = Path(env["XDG_STATE_HOME"]) / "smllm" / "user.db"
        if user_db.exists():
            conn = sqlite3.connect(user_db)
            try:
                for table in ("sessions", "audit"):
                    texts += [repr(r) for r in conn.execute(f"SELECT * FROM {table}")]
            finally:
                conn.close()
        for folder in (Path(env["XDG_STATE_HOME"]), Path(env["XDG_CACHE_HOME"]), *folders):
            for path in folder.rglob("*") if folder.exists() else []:
                if path.is_file():
                    texts.append(path.read_bytes().decode("utf-8", "replace"))
        for secret in SECRETS:
            for text in texts:
                assert secret not in text, text


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def pg_project(
    project: Path,
    env: dict[str, str],
    pg_url: str,
    pg_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """The example project on the test server, its URL in SMLLM_TEST_PG (url-env)."""
    use_postgres(project, pg_url, pg_namespace, env, monkeypatch)
    return project


@pytest.fixture
def stopped(pg_server: Any) -> Iterator[Any]:
    """Yields the server; whatever the test did to it, it runs again afterwards."""
    yield pg_server
    if not pg_server.running():
        pg_server.restart()


def new_key(project: Path, env: dict[str, str]) -> str:
    ran = smllm(["session", "new", "--json"], project, env)
    assert ran.code == 0, ran.err
    key: str = json.loads(ran.out)["session"]
    return key


def holding(project: Path, env: dict[str, str], ref: str = "GH-1") -> str:
    """A session holding issue REF of the example machine (made through the real CLI)."""
    key = new_key(project, env)
    ran = smllm(enter_args(key, ref), project, env)
    assert ran.code == 0, ran.out + ran.err
    return key


def bound(seen: Seen, project: Path, env: dict[str, str]) -> str:
    """A Claude session (host session h1) holding GH-1: its stop hooks block."""
    ran = seen.hook("session-start", {"session_id": "h1"}, project, env)
    assert ran.code == 0, ran.err
    key = json.loads(ran.out)["hookSpecificOutput"]["additionalContext"].split()[2]
    ran = seen.run(enter_args(key, "GH-1"), project, env)
    assert ran.code == 0, ran.out + ran.err
    stop = seen.hook("stop", HOOK_STOP, project, env)
    assert json.loads(stop.out)["decision"] == "block"
    return key


def with_url(env: dict[str, str], url: str) -> dict[str, str]:
    return {**env, "SMLLM_TEST_PG": url}


# -- a first smoke test, on both backends --------------------------------------------------------


def test_enter_and_list(store_project: Path, env: dict[str, str], backend: str) -> None:
    key = new_key(store_project, env)
    ran = smllm(enter_args(key, "GH-12"), store_project, env)
    assert ran.code == 0, ran.err
    listed = smllm(["instance", "list"], store_project, env)
    assert "GH-12" in listed.out
    assert (store_project / ".smllm" / "state").exists() == (backend == "sqlite")


# -- the server down ---------------------------------------------------------------------------


def test_the_server_stopped(
    pg_project: Path, env: dict[str, str], stopped: Any, seen: Seen
) -> None:
    """A stopped server: every command that needs the store exits 2 naming the host, stdout
    empty; a hook fails open (exit 1, nothing on stdout: the agent goes on); validate warns
    (INS-5). Started again, the next fire works and nothing was lost."""
    project = pg_project
    key = bound(seen, project, env)
    rows = StoreRows.of(project, env)
    [before] = rows.instance_rows()
    stopped.stop("fast")
    down = f"error: the store at {host(stopped)} is unreachable: Connection refused\n"
    for args in (
        ["instance", "list"],
        ["instance", "list", "--json"],
        ["instance", "show", "GH-1"],
        ["fire", "--session", key, "yield"],
        ["fire", "--session", key, "yield", "--json"],
        [*enter_args(key, "GH-2"), "--json"],
        ["session", "show", key],
    ):
        ran = seen.run(args, project, env)
        assert (ran.code, ran.out, ran.err) == (2, "", down), args
    debug = seen.run(["fire", "--session", key, "yield"], project, {**env, "SMLLM_DEBUG": "1"})
    assert (debug.code, debug.out, debug.err) == (2, "", down)  # an expected error: no traceback
    # hooks fail open: exit 1, stdout empty (cli-and-harnesses.md §5)
    for which in ("stop", "session-start"):
        ran = seen.hook(which, HOOK_STOP, project, env)
        assert (ran.code, ran.out, ran.err) == (1, "", down), which
    # a prompt with nothing to clear never reads an instance
    ran = seen.hook("user-prompt-submit", {"session_id": "h1", "prompt": "go"}, project, env)
    assert (ran.code, ran.out, ran.err) == (0, "{}\n", "")
    ran = seen.run(["validate", "--json"], project, env)
    assert ran.code == 0 and ran.err == ""
    [finding] = [f for f in json.loads(ran.out)["findings"] if f["rule"].startswith("INS")]
    assert (finding["rule"], finding["level"], finding["message"]) == (
        "INS-5",
        "warning",
        f"saved instances weren't checked: {down[len('error: ') : -1]}",
    )

    stopped.restart()
    assert rows.instance_rows() == [before]
    ran = seen.run(["fire", "--session", key, "yield"], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out
    assert "Yielded: staying in PLAN." in ran.out
    assert [h["event"] for h in rows.history(before["id"])] == ["enter", "yield"]
    seen.check(env, project)


def test_a_long_lived_process_outlives_a_server_restart(
    pg_project: Path, env: dict[str, str], stopped: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One App (as the MCP server keeps) and one MCP server process: the server restarts (fast,
    then as after a crash) between two calls; the next call reconnects and works."""
    from helpers.mcp_client import McpProcess

    from smllm.api.app import App

    project = pg_project
    monkeypatch.chdir(project)
    key = new_key(project, env)
    app = App()
    assert app.fire(key, "enter", (("stateMachine", "dev"), ("issueId", "GH-1"))).ok
    with McpProcess(project, env) as mcp:
        mcp.initialize()
        other = new_key(project, env)
        text, error = mcp.tool(
            session=other, event="enter", params={"stateMachine": "dev", "issueId": "GH-2"}
        )
        assert not error, text
        for mode in ("fast", "immediate"):
            stopped.stop(mode)
            stopped.restart()
            assert app.fire(key, "yield", ()).ok
            text, error = mcp.tool(session=other, event="yield")
            assert (error, "Yielded: staying in PLAN." in text) == (False, True), text
        assert mcp.close() == 0
        assert "Traceback" not in mcp.stderr()
    rows = StoreRows.of(project, env)
    for d in rows.instance_rows():
        assert [h["event"] for h in rows.history(d["id"])] == ["enter", "yield", "yield"]


# -- URLs that can't reach the store -----------------------------------------------------------


def bad_urls(pg_server: Any) -> dict[str, tuple[str, str]]:
    """name → (URL, the error it must give)."""
    hp = host(pg_server)
    closed = free_port()
    return {
        "wrong password": (
            pg_server.url(password="not the " + PASSWORD),
            f"error: the store at {hp} refused the connection: password authentication failed "
            'for user "smllm"\n',
        ),
        "wrong user": (
            pg_server.url().replace("smllm:", "smlm:", 1),
            f"error: the store at {hp} refused the connection: password authentication failed "
            'for user "smlm"\n',
        ),
        "wrong database": (
            pg_server.url(database="smlm"),
            f'error: the store at {hp} refused the connection: database "smlm" does not exist\n',
        ),
        "wrong port": (
            pg_server.url().replace(f":{pg_server.port}/", f":{closed}/"),
            f"error: the store at 127.0.0.1:{closed} is unreachable: Connection refused\n",
        ),
        "port out of range": (
            pg_server.url().replace(f":{pg_server.port}/", ":99999/"),
            'error: the store URL is not valid: invalid port number: "99999"\n',
        ),
        "garbage": (
            "postgresq1//smllm:" + quote(PASSWORD, safe="") + "@127.0.0.1/smllm",
            'error: the store URL is not valid: missing "=" after "***" in connection info '
            "string\n",
        ),
        "an unknown parameter": (
            pg_server.url() + "?sslmod=disable",
            'error: the store URL is not valid: invalid URI query parameter: "sslmod"\n',
        ),
    }


CASES = [
    "wrong password",
    "wrong user",
    "wrong database",
    "wrong port",
    "port out of range",
    "garbage",
    "an unknown parameter",
]


@pytest.mark.parametrize("case", CASES)
def test_a_url_that_cannot_connect(
    pg_project: Path, env: dict[str, str], pg_server: Any, seen: Seen, case: str
) -> None:
    """Each bad URL gives its message, exit 2 and nothing on stdout (the first case through
    every surface: text, --json, SMLLM_DEBUG, a hook failing open, validate's INS-5)."""
    project = pg_project
    key = bound(seen, project, env)
    url, message = bad_urls(pg_server)[case]
    bad = with_url(env, url)
    every = case == CASES[0]
    for args in (
        ["fire", "--session", key, "yield", "--json"],
        *(
            [
                ["instance", "list"],
                ["instance", "list", "--json"],
                ["fire", "--session", key, "yield"],
                [*enter_args(key, "GH-2"), "--json"],
            ]
            if every
            else []
        ),
    ):
        ran = seen.run(args, project, bad)
        assert (ran.code, ran.out, ran.err) == (2, "", message), args
    ran = seen.hook("stop", HOOK_STOP, project, bad)
    assert (ran.code, ran.out, ran.err) == (1, "", message)
    if every:
        debug = seen.run(["instance", "list"], project, {**bad, "SMLLM_DEBUG": "1"})
        assert (debug.code, debug.out, debug.err) == (2, "", message)
        ran = seen.run(["validate", "--json"], project, bad)
        assert ran.code == 0
        [finding] = [f for f in json.loads(ran.out)["findings"] if f["rule"].startswith("INS")]
        assert finding["message"] == f"saved instances weren't checked: {message[7:-1]}"
    # the right URL again: nothing changed
    ran = seen.run(["fire", "--session", key, "yield"], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out
    [inst] = StoreRows.of(project, env).instance_rows()
    assert inst["version"] == 2
    seen.check(env, project)


def test_the_url_written_in_the_config(
    project: Path, env: dict[str, str], pg_server: Any, pg_namespace: str, seen: Seen
) -> None:
    """`[state] url` (not url-env): a wrong password in the config file itself is never shown
    either, and the right one works."""
    config = project / ".smllm" / "config.toml"
    plain = config.read_text()
    key = new_key(project, env)
    for password, code in (("not the " + PASSWORD, 2), (PASSWORD, 0)):
        url = pg_server.url(password=password)
        config.write_text(plain + f'\n[state]\nurl = "{url}"\nnamespace = "{pg_namespace}"\n')
        ran = seen.run([*enter_args(key, "GH-1"), "--json"], project, env)
        assert ran.code == code, ran.out + ran.err
        if code:
            assert (ran.out, ran.err) == (
                "",
                f"error: the store at {host(pg_server)} refused the connection: password "
                'authentication failed for user "smllm"\n',
            )
        else:
            assert json.loads(ran.out)["ok"] is True
        ran = seen.run(["validate", "--json"], project, env)
        assert ran.code == 0
    config.write_text(plain)
    # not the project, whose config holds the URL, nor the compiled-config cache, which keeps
    # a copy of that config's text
    shutil.rmtree(env["XDG_CACHE_HOME"], ignore_errors=True)
    seen.check(env)


def test_url_env_unset(pg_project: Path, env: dict[str, str], seen: Seen) -> None:
    project = pg_project
    key = bound(seen, project, env)
    for value in (None, ""):
        bad = {k: v for k, v in env.items() if k != "SMLLM_TEST_PG"}
        if value is not None:
            bad["SMLLM_TEST_PG"] = value
        message = "error: state.url-env names SMLLM_TEST_PG, which is unset or empty\n"
        for args in (["instance", "list"], ["fire", "--session", key, "yield", "--json"]):
            ran = seen.run(args, project, bad)
            assert (ran.code, ran.out, ran.err) == (2, "", message), args
        ran = seen.hook("stop", HOOK_STOP, project, bad)
        assert (ran.code, ran.out, ran.err) == (1, "", message)
    seen.check(env, project)


# -- timeouts, locks and dropped connections ---------------------------------------------------


def test_a_statement_timeout(
    pg_project: Path, env: dict[str, str], pg_url: str, pg_namespace: str, seen: Seen
) -> None:
    """A statement the server cancels (the URL's `options` set statement_timeout; the commit's
    UPDATE waits for a row lock longer than that): exit 2 saying so, nothing written."""
    project = pg_project
    key = holding(project, env)
    short = with_url(env, pg_url + "?options=" + quote("-c statement_timeout=300"))
    rows = StoreRows.of(project, env)
    [before] = rows.instance_rows()
    locker = lock_row(pg_url, pg_namespace)
    try:
        ran = seen.run(["fire", "--session", key, "yield"], project, short)
        # reads never wait for the lock: the view is there at once
        view = seen.run(["session", "show", key], project, short)
    finally:
        locker.rollback()
        locker.close()
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == (
        f"error: the store at 127.0.0.1:{pg_url.rsplit(':', 1)[1].split('/')[0]} gave up: "
        "canceling statement due to statement timeout\n"
    )
    assert (view.code, view.err) == (0, "") and "dev › PLAN" in view.out
    assert rows.instance_rows() == [before]
    assert len(rows.history(before["id"])) == 1
    ran = seen.run(["fire", "--session", key, "yield"], project, short)
    assert (ran.code, ran.err) == (0, ""), ran.out
    seen.check(env, project)


def test_a_lock_held_past_five_seconds(
    pg_project: Path, env: dict[str, str], pg_url: str, pg_namespace: str, seen: Seen
) -> None:
    """engine.md §10: a writer waits at most 5 s for a lock, then `error: the store is busy`
    (a call error: exit 1); a hook that only reads isn't held up."""
    project = pg_project
    key = bound(seen, project, env)
    rows = StoreRows.of(project, env)
    [before] = rows.instance_rows()
    locker = lock_row(pg_url, pg_namespace)
    try:
        began = time.monotonic()
        ran = seen.run(["fire", "--session", key, "yield"], project, env)
        waited = time.monotonic() - began
        began = time.monotonic()
        stop = seen.hook("stop", HOOK_STOP, project, env)
        read = time.monotonic() - began
    finally:
        locker.rollback()
        locker.close()
    assert (ran.code, ran.out, ran.err) == (1, "", "error: the store is busy\n")
    assert 5 <= waited < 30
    assert json.loads(stop.out)["decision"] == "block" and read < 5
    assert rows.instance_rows() == [before]
    ran = seen.run(["fire", "--session", key, "yield"], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out
    seen.check(env, project)


LAUNCH = """\
import sys
import slowdb
slowdb.install_from_env()
from smllm.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_connection_dropped_during_a_commit(
    pg_project: Path, env: dict[str, str], pg_server: Any, tmp_path: Path, seen: Seen
) -> None:
    """`smllm fire` stopped just before its COMMIT (tests/helpers/slowdb.py); the server ends
    its connection (pg_terminate_backend); then the COMMIT fails: exit 2 saying the commit
    was not saved, nothing of it in the store, and the next fire works."""
    project = pg_project
    key = holding(project, env)
    rows = StoreRows.of(project, env)
    [before] = rows.instance_rows()
    phase, release = tmp_path / "phase", tmp_path / "release"
    slow = {"phase": str(phase), "stall": "committing:instance", "release": str(release)}
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, "fire", "--session", key, "pause"],
        cwd=project,
        env={
            **env,
            "SMLLM_TEST_SLOWDB": json.dumps(slow),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "helpers"), env.get("PYTHONPATH", "")]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while read_phase(str(phase)) != "committing:instance":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        ended = pg_server.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'smllm' AND state = 'idle in transaction'"
        )
        assert ended.split() == ["t"]
    finally:
        release.touch()
    out, err = proc.communicate(timeout=60)
    seen.texts += [out, err]
    assert (proc.returncode, out) == (2, "")
    prefix = (
        f"error: the store at {host(pg_server)} dropped the connection during a commit, which "
        "was not saved: "
    )
    assert err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1, err
    assert len(err) > len(prefix) + 1
    assert rows.instance_rows() == [before]
    assert [h["event"] for h in rows.history(before["id"])] == ["enter"]
    ran = seen.run(["fire", "--session", key, "pause"], project, env)
    assert (ran.code, ran.err) == (0, ""), ran.out
    [after] = rows.instance_rows()
    assert (after["status"], after["version"]) == ("paused", 2)
    seen.check(env, project)


# -- namespaces and schema versions ------------------------------------------------------------


def test_two_namespaces_in_one_database(
    pg_project: Path,
    env: dict[str, str],
    tmp_path: Path,
    pg_url: str,
    pg_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two projects, one database, two namespaces: neither sees the other's instances, and
    both may use the same ref."""
    first = pg_project
    second = tmp_path / "second"
    second.mkdir()
    copy_example(str(second))
    use_postgres(second, pg_url, pg_namespace + "-2", env, monkeypatch)
    keys = [holding(first, env, "GH-1"), holding(second, env, "GH-1")]
    holding(second, env, "GH-2")
    ids = {}
    for project, refs in ((first, ["GH-1"]), (second, ["GH-1", "GH-2"])):
        ran = smllm(["instance", "list", "--json"], project, env)
        assert ran.code == 0, ran.err
        listed = json.loads(ran.out)["instances"]
        assert sorted(i["ref"] for i in listed) == refs
        ids[project] = {i["ref"]: i["id"] for i in listed}
        assert StoreRows.of(project, env).count() == len(refs)
    assert ids[first]["GH-1"] != ids[second]["GH-1"]
    # one project's ids are unknown in the other
    ran = smllm(["instance", "show", ids[second]["GH-2"]], first, env)
    assert ran.code == 1
    # a write in one leaves the other as it was
    assert smllm(["fire", "--session", keys[0], "pause"], first, env).code == 0
    [other] = [i for i in StoreRows.of(second, env).instance_rows() if i["ref"] == "GH-1"]
    assert (other["status"], other["version"]) == ("active", 1)
    ran = smllm(["validate", "--json", "--info"], second, env)
    assert [f for f in json.loads(ran.out)["findings"] if f["rule"].startswith("INS")] == []


def test_a_schema_newer_than_smllm(
    pg_project: Path,
    env: dict[str, str],
    pg_server: Any,
    pg_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    seen: Seen,
) -> None:
    project = pg_project
    url = fresh_database(pg_server)
    env["SMLLM_TEST_PG"] = url
    monkeypatch.setenv("SMLLM_TEST_PG", url)
    key = holding(project, env)
    other = new_key(project, env)
    rows = StoreRows.of(project, env)
    assert rows.schema_version() == 1
    rows._pg("UPDATE smllm.meta SET value = '99' WHERE key = 'schema'")
    name = f"the store at {host(pg_server)} (namespace {pg_namespace})"
    message = f"error: {name} was written by a newer smllm\n"
    for args in (
        ["instance", "list"],
        ["fire", "--session", key, "yield"],
        [*enter_args(other, "GH-2"), "--json"],
        ["session", "new"],
    ):
        ran = seen.run(args, project, env)
        assert (ran.code, ran.out, ran.err) == (2, "", message), args
    ran = seen.run(["validate", "--json"], project, env)
    [finding] = [f for f in json.loads(ran.out)["findings"] if f["rule"].startswith("INS")]
    assert finding["message"] == f"saved instances weren't checked: {name} was written by a " + (
        "newer smllm"
    )
    assert rows.schema_version() == 99 and rows.count() == 1
    seen.check(env, project)


# -- the store in process: creating, refusing, waiting -------------------------------------------
