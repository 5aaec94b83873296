"""`smllm store migrate`: a project's instances and history moved between SQLite and
PostgreSQL, all or nothing, through the real CLI and a real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import enter_args, smllm
from helpers.pgserver import PASSWORD

from smllm.engine.records import HistoryRecord
from smllm.errors import StoreConflict
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
