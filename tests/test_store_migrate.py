"""`smllm store migrate`: a project's instances and history moved between SQLite and
PostgreSQL, all or nothing, through the real CLI and a real server. Then the SQLite store's
part in process: what a migration moves (dump, load, discard), the connections a hot command
keeps open until its process ends, and the store's name in the error of a lookup by ref."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import enter_args, smllm
from helpers.pgserver import PASSWORD
from helpers.store_records import T0, inst, new

import smllm.store.sqlite as sqlite_store
from smllm.engine.records import HistoryRecord, InstanceWrite
from smllm.errors import RefTaken, StoreConflict, StoreError
from smllm.store.base import StoreDump
from smllm.store.postgres import PostgresStore
from smllm.store.sqlite import SqliteStore

CONFIG = """\
# the team's config: this comment must survive the move
[machines]
files = ["dev.smllm.yaml"]  # the example machine

[state]
dir = "state"  # where instances live
"""


def new_session(project: Path, env: dict[str, str]) -> str:
    key: str = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    return key


def fill(project: Path, env: dict[str, str]) -> list[str]:
    """Three issues, GH-1 paused (two history records), GH-2 and GH-3 active (one each)."""
    refs = ["GH-1", "GH-2", "GH-3"]
    for ref in refs:
        key = new_session(project, env)
        ran = smllm(enter_args(key, ref), project, env)
        assert ran.code == 0, ran.err
        if ref == "GH-1":
            ran = smllm(["fire", "--session", key, "pause"], project, env)
            assert ran.code == 0, ran.err
    return refs


def shown(project: Path, env: dict[str, str]) -> dict[str, Any]:
    """Every instance with its history, as `instance show --json` gives them."""
    listed = json.loads(smllm(["instance", "list", "--json"], project, env).out)
    out = {}
    for item in listed["instances"]:
        ran = smllm(["instance", "show", item["id"], "--json"], project, env)
        assert ran.code == 0, ran.err
        out[item["id"]] = json.loads(ran.out)
    return out


def test_sqlite_to_postgres_and_back(
    project: Path, env: dict[str, str], pg_url: str, pg_namespace: str
) -> None:
    (project / ".smllm" / "config.toml").write_text(CONFIG)
    env["TEAM_DB"] = pg_url
    fill(project, env)
    before = shown(project, env)
    assert len(before) == 3

    ran = smllm(["store", "migrate", "env:TEAM_DB", "--namespace", pg_namespace], project, env)
    assert ran.code == 0, ran.err
    assert ran.out.startswith("moved 3 instances and 4 history records from .smllm/state to ")
    assert "postgresql://127.0.0.1:" in ran.out and f"namespace {pg_namespace}" in ran.out
    config = (project / ".smllm" / "config.toml").read_text()
    assert "# the team's config: this comment must survive the move" in config
    assert "# the example machine" in config
    assert f'url-env = "TEAM_DB"\nnamespace = "{pg_namespace}"' in config
    assert 'dir = "state"' not in config
    # the same instances and histories, now read from PostgreSQL; SQLite's rows are gone
    assert shown(project, env) == before
    assert SqliteStore(str(project / ".smllm" / "state" / "smllm.db")).dump() == StoreDump((), ())

    # a fire on PostgreSQL, then back to a new SQLite folder
    key = new_session(project, env)
    ran = smllm(enter_args(key, "GH-4"), project, env)
    assert ran.code == 0, ran.err
    after = shown(project, env)
    ran = smllm(["store", "migrate", ".smllm/local", "--json"], project, env)
    assert ran.code == 0, ran.err
    report = json.loads(ran.out)
    assert (report["instances"], report["history"], report["sourceKept"]) == (4, 5, False)
    assert 'dir = "local"' in (project / ".smllm" / "config.toml").read_text()
    assert shown(project, env) == after
    assert PostgresStore(pg_url, pg_namespace).dump() == StoreDump((), ())
    assert PASSWORD not in ran.out + ran.err


def test_a_taken_ref_copies_nothing(
    project: Path, env: dict[str, str], pg_url: str, pg_namespace: str
) -> None:
    env["TEAM_DB"] = pg_url
    fill(project, env)
    # another project already keeps GH-2 in that namespace
    other = project.parent / "other"
    (other / ".smllm").mkdir(parents=True)
    for f in (project / ".smllm").glob("*.yaml"):
        (other / ".smllm" / f.name).write_text(f.read_text())
    (other / ".smllm" / "config.toml").write_text(
        f'[machines]\nfiles = ["dev.smllm.yaml"]\n[state]\nurl-env = "TEAM_DB"\n'
        f'namespace = "{pg_namespace}"\n'
    )
    assert smllm(enter_args(new_session(other, env), "GH-2"), other, env).code == 0
    target_before = PostgresStore(pg_url, pg_namespace).dump()
    config_before = (project / ".smllm" / "config.toml").read_bytes()
    source_before = SqliteStore(str(project / ".smllm" / "state" / "smllm.db")).dump()

    ran = smllm(["store", "migrate", "env:TEAM_DB", "--namespace", pg_namespace], project, env)
    assert ran.code == 1
    assert ran.err.endswith(
        f"namespace {pg_namespace} already holds dev GH-2; nothing was copied\n"
    )
    assert PostgresStore(pg_url, pg_namespace).dump() == target_before
    assert (project / ".smllm" / "config.toml").read_bytes() == config_before
    assert SqliteStore(str(project / ".smllm" / "state" / "smllm.db")).dump() == source_before


def test_keep_leaves_the_source(
    project: Path, env: dict[str, str], pg_url: str, pg_namespace: str
) -> None:
    env["TEAM_DB"] = pg_url
    fill(project, env)
    db = str(project / ".smllm" / "state" / "smllm.db")
    source = SqliteStore(db).dump()
    ran = smllm(
        ["store", "migrate", "env:TEAM_DB", "--namespace", pg_namespace, "--keep"], project, env
    )
    assert ran.code == 0, ran.err
    assert "the rows moved are still in .smllm/state too" in ran.out
    assert SqliteStore(db).dump() == source
    assert PostgresStore(pg_url, pg_namespace).dump() == source


def test_a_url_with_its_password(
    project: Path, env: dict[str, str], pg_url: str, pg_namespace: str
) -> None:
    fill(project, env)
    ran = smllm(["store", "migrate", pg_url, "--namespace", pg_namespace], project, env)
    assert ran.code == 0, ran.err
    assert "note: .smllm/config.toml now holds the URL's password" in ran.err
    assert PASSWORD not in ran.out and "%21" not in ran.out
    assert f'url = "{pg_url}"' in (project / ".smllm" / "config.toml").read_text()
    assert len(shown(project, env)) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([".smllm/state"], "error: .smllm/config.toml already keeps its instances there\n"),
        (["state2", "--namespace", "x"], "error: --namespace goes with a PostgreSQL target\n"),
        (["mysql://h/db"], "error: mysql:// is not a store; give a postgresql:// URL\n"),
        (["env:"], "error: env: needs a variable name, as in env:SMLLM_DB\n"),
        (
            ["env:NOT_SET_HERE"],
            "error: state.url-env names NOT_SET_HERE, which is unset or empty\n",
        ),
    ],
)
def test_refusals(project: Path, env: dict[str, str], args: list[str], message: str) -> None:
    fill(project, env)
    config = (project / ".smllm" / "config.toml").read_bytes()
    ran = smllm(["store", "migrate", *args], project, env)
    assert (ran.code, ran.out, ran.err) == (2, "", message)
    assert (project / ".smllm" / "config.toml").read_bytes() == config


def test_a_store_changed_during_the_copy_copies_nothing(
    project: Path, env: dict[str, str], pg_url: str, pg_namespace: str, tmp_path: Path
) -> None:
    fill(project, env)
    dump = SqliteStore(str(project / ".smllm" / "state" / "smllm.db")).dump()
    assert len(dump.instances) == 3
    targets = [PostgresStore(pg_url, pg_namespace), SqliteStore(str(tmp_path / "t" / "x.db"))]
    for target in targets:
        with pytest.raises(StoreConflict):
            target.load(dump, lambda: False)
        assert target.dump() == StoreDump((), ())
        target.load(dump, lambda: True)
        assert target.dump() == dump
        first = dump.instances[0]
        assert [h.to_json() for h in target.history(first[1], first[0])] == [
            HistoryRecord.from_json(json.loads(d)).to_json()
            for i, d in dump.history
            if i == first[0]
        ]
        # discard refuses a store that no longer holds exactly the dump
        changed = StoreDump(dump.instances[:2], dump.history)
        assert target.discard(changed) is False
        assert target.dump() == dump
        assert target.discard(dump) is True
        assert target.dump() == StoreDump((), ())
        target.close()


# --- in process, SQLite: what a migration moves (dump, load, discard), a hot command's kept
# connections, the store's name in an error --------------------------------------------------


def moved(i: object) -> InstanceWrite:
    """An update of `i` (version 1 → 2), with its history record."""
    assert isinstance(i, type(inst("x")))
    h = HistoryRecord(T0, "k", "agent", "go", {}, "PLAN", "WORK", "active", "active", 2, ())
    return InstanceWrite(i._replace(state="WORK", version=2), 1, h)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "from" / "smllm.db"))
    a, b = inst("a"), inst("b")._replace(ref=None)
    store.commit_instances([new(a), new(b)])
    store.commit_instances([moved(a)])
    yield store
    store.close()


def _rows(path: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        instances = conn.execute(
            "SELECT id, machine, ref, status, updated, version, data FROM instances ORDER BY id"
        ).fetchall()
        history = conn.execute("SELECT instance, data FROM history ORDER BY seq").fetchall()
    conn.close()
    return instances, history


def test_a_dump_is_every_row_as_stored(source: SqliteStore) -> None:
    dump = source.dump()
    instances, history = _rows(source.path)
    assert dump == StoreDump(tuple(instances), tuple(history))
    assert [(r[0], r[2], r[5]) for r in dump.instances] == [("a", "R-a", 2), ("b", None, 1)]
    assert [r[0] for r in dump.history] == ["a", "b", "a"]  # commit order
    assert all(isinstance(r, tuple) for r in (*dump.instances, *dump.history))


def test_a_store_never_made_dumps_empty_and_stays_unmade(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "none" / "smllm.db"))
    assert store.dump() == StoreDump((), ())
    assert not (tmp_path / "none").exists()


def test_a_dump_of_a_damaged_store_is_the_store_s_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    with pytest.raises(StoreError, match=f"^{path}: "):
        SqliteStore(str(path)).dump()


def test_a_load_writes_the_rows_as_they_were(source: SqliteStore, tmp_path: Path) -> None:
    dump = source.dump()
    target = SqliteStore(str(tmp_path / "to" / "smllm.db"))
    target.load(dump, lambda: True)
    assert _rows(target.path) == _rows(source.path)
    assert target.instance("dev", "a") == source.instance("dev", "a")
    assert target.dump() == dump
    target.close()


def test_a_load_refused_writes_nothing(source: SqliteStore, tmp_path: Path) -> None:
    dump = source.dump()
    target = SqliteStore(str(tmp_path / "to" / "smllm.db"))
    with pytest.raises(StoreConflict):  # the source changed meanwhile
        target.load(dump, lambda: False)
    assert target.dump() == StoreDump((), ())
    # a ref taken in the target: RefTaken names the machine and the ref, nothing written
    target.commit_instances([new(inst("c")._replace(ref="R-a"))])
    before = target.dump()
    with pytest.raises(RefTaken) as taken:
        target.load(dump, lambda: True)
    assert (taken.value.machine, taken.value.ref) == ("dev", "R-a")
    assert target.dump() == before
    target.close()


def test_a_load_of_an_instance_without_ref_names_its_id(
    source: SqliteStore, tmp_path: Path
) -> None:
    target = SqliteStore(str(tmp_path / "to" / "smllm.db"))
    target.commit_instances([new(inst("b"))])  # the id b is taken
    without_ref = StoreDump(tuple(r for r in source.dump().instances if r[0] == "b"), ())
    with pytest.raises(RefTaken) as taken:
        target.load(without_ref, lambda: True)
    assert (taken.value.machine, taken.value.ref) == ("dev", "b")
    target.close()


def test_a_discard_empties_the_store_only_as_dumped(source: SqliteStore) -> None:
    dump = source.dump()
    source.commit_instances([moved(inst("b")._replace(ref=None))])  # b moved on since
    assert source.discard(dump) is False
    assert source.dump() != StoreDump((), ())
    again = source.dump()
    source.commit_instances([new(inst("d"))])  # one more instance since
    assert source.discard(again) is False
    latest = source.dump()
    one_less = latest._replace(history=latest.history[1:])  # as many instances, fewer records
    assert source.discard(one_less) is False
    assert source.dump() == latest
    assert source.discard(latest) is True
    assert _rows(source.path) == ([], [])


def test_kept_connections_stay_open_after_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_open_until_exit: from then on, every connection opened is kept (and usable) after
    its store closes; a second call keeps the same list."""
    monkeypatch.setattr(sqlite_store, "_kept", None)
    sqlite_store.keep_open_until_exit()
    kept = sqlite_store._kept
    assert kept == []
    sqlite_store.keep_open_until_exit()
    assert sqlite_store._kept is kept
    store = SqliteStore(str(tmp_path / "s" / "smllm.db"))
    store.commit_instances([new(inst("a"))])
    conn = store._conn
    assert conn is not None and kept == [conn]
    store.close()
    assert store._conn is None
    assert conn.execute("SELECT id FROM instances").fetchall() == [("a",)]  # still open
    conn.close()


def test_a_damaged_instance_found_by_ref_names_the_store(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s" / "smllm.db"))
    store.commit_instances([new(inst("a"))])
    store.close()
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE instances SET data = '{' WHERE id = 'a'")
    conn.close()
    with pytest.raises(StoreError, match=f"^{store.path}: a saved instance can't be read"):
        store.find("dev", "R-a")


def test_a_dump_of_a_store_without_tables_is_the_store_s_error(tmp_path: Path) -> None:
    """SQLite's own words, after the store's path: a store file of this version whose tables
    are gone (an OperationalError), and one whose tables' pages are garbage."""
    path = tmp_path / "bare.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {sqlite_store.SCHEMA_VERSION}")
    conn.close()
    with pytest.raises(StoreError) as caught:
        SqliteStore(str(path)).dump()
    assert str(caught.value) == f"{path}: no such table: instances"
    store = SqliteStore(str(tmp_path / "s" / "smllm.db"))
    store.commit_instances([new(inst("a"))])
    store.close()
    data = bytearray(Path(store.path).read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)
    Path(store.path).write_bytes(bytes(data))
    with pytest.raises(StoreError) as caught:
        SqliteStore(store.path).dump()
    assert str(caught.value) == f"{store.path}: database disk image is malformed"
