"""validate's INS rules: saved instances checked against the machines as they are now
(validation.md §2.6), on stores filled by the real CLI and then edited as a user would; on both
instance-store backends (conftest's `store_project`, tests/helpers/storerows.py), except where
a test damages the SQLite file itself."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm
from helpers.storerows import StoreRows, fresh_database

DEV = Path(".smllm") / "dev.smllm.yaml"
STORE = Path(".smllm") / "state" / "smllm.db"


def _ins(project: Path, env: dict[str, str], *extra: str) -> tuple[int, list[dict[str, Any]]]:
    ran = smllm(["validate", "--json", *extra], project, env)
    assert ran.err == ""
    data = json.loads(ran.out)
    return ran.code, [f for f in data["findings"] if f["rule"].startswith("INS")]


def _two_paused(project: Path, env: dict[str, str]) -> None:
    """issue GH-1 paused in PLAN, issue GH-2 paused in WORK, issue GH-3 completed."""
    key = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]

    def fire(*args: str) -> None:
        ran = smllm(["fire", "--session", key, *args], project, env)
        assert ran.code == 0, ran.out + ran.err

    (project / "PLAN.md").write_text("plan\n")
    fire("enter", "--param", "stateMachine=dev", "--param", "issueId=GH-1")
    fire("pause")
    for ref, last in (("GH-2", "pause"), ("GH-3", "done")):
        fire("enter", "--param", "stateMachine=dev", "--param", f"issueId={ref}")
        fire("planned", "--param", "size=small")
        fire(last)


def _rows(project: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {d["ref"]: d for d in StoreRows.of(project, env).instance_rows()}


def test_nothing_to_report_and_nothing_created(
    store_project: Path,
    env: dict[str, str],
    backend: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = store_project
    if backend == "postgres":
        # a database without smllm's schema
        url = fresh_database(request.getfixturevalue("pg_server"))
        env["SMLLM_TEST_PG"] = url
        monkeypatch.setenv("SMLLM_TEST_PG", url)
    assert _ins(project, env) == (0, [])
    # validate never creates a store
    assert not (project / ".smllm" / "state").exists()
    assert not StoreRows.of(project, env).exists()
    _two_paused(project, env)
    assert _ins(project, env, "--info") == (0, [])


def test_a_state_renamed_and_a_pattern_narrowed(store_project: Path, env: dict[str, str]) -> None:
    project = store_project
    _two_paused(project, env)
    dev = project / DEV
    text = dev.read_text().replace("WORK", "BUILD").replace("^GH-[0-9]+$", "^GH-[02-9]$")
    dev.write_text(text)
    code, found = _ins(project, env)
    assert code == 0  # warnings and info only
    # validation.md §2.6: the machine file, and no line or path: an instance is in the store,
    # not at a node of the file
    assert [
        (f["rule"], f["level"], f["file"], f["line"], f["column"], f["path"], f["message"])
        for f in found
    ] == [
        (
            "INS-1",
            "warning",
            str(DEV),
            None,
            None,
            None,
            "issue GH-2 is saved in WORK, which no longer exists",
        ),
        ("INS-6", "info", str(DEV), None, None, None, "issue GH-1 no longer matches ^GH-[02-9]$"),
    ]
    assert found[0]["hint"] == (
        "restore the state, or fire enter for the instance with state: an existing state"
    )
    text_out = smllm(["validate"], project, env).out
    assert "INS-6" not in text_out  # info only with --info
    assert text_out == (
        f"{DEV}: warning: issue GH-2 is saved in WORK, which no longer exists (INS-1)\n"
        "  hint: restore the state, or fire enter for the instance with state: an existing "
        "state\n"
        "0 errors, 1 warning, 1 info\n"
    )
    assert smllm(["validate", "--warnings"], project, env).code == 1


def test_a_machine_with_errors_is_not_checked(store_project: Path, env: dict[str, str]) -> None:
    """validation.md §1: INS rules run only on machines without errors; a broken file's
    instances are neither checked nor counted as not configured (INS-3)."""
    project = store_project
    _two_paused(project, env)
    dev = project / DEV
    dev.write_text(dev.read_text().replace("initial: PLAN", "initial: PLN").replace("WORK", "X"))
    assert _ins(project, env, "--info") == (1, [])


def test_detour_return_unreadable_records_and_lost_machines(
    store_project: Path, env: dict[str, str]
) -> None:
    project = store_project
    _two_paused(project, env)
    rows = StoreRows.of(project, env)
    gh1 = _rows(project, env)["GH-1"]
    rows.put(gh1["id"], "dev", json.dumps({**gh1, "resumeState": "GONE"}))
    rows.put("i-broken", "dev", '{"id": "i-broken", ')
    newer = {**gh1, "id": "i-newer", "ref": None, "status": "archived"}
    rows.put("i-newer", "dev", json.dumps(newer))
    for n in range(2):
        old = {**gh1, "id": f"i-old{n}", "machine": "old", "ref": None}
        rows.put(f"i-old{n}", "old", json.dumps(old))
    rows.put("i-old9", "old", json.dumps({**old, "status": "completed"}), "completed")
    code, found = _ins(project, env, "--info")
    assert code == 0
    config = str(Path(".smllm") / "config.toml")
    assert {(f["line"], f["column"], f["path"]) for f in found} == {(None, None, None)}
    # in load order (the config, then its machine file), then by rule and message
    assert [(f["rule"], f["file"], f["message"]) for f in found] == [
        ("INS-3", config, "2 saved instances of old, which is not configured"),
        ("INS-2", str(DEV), "issue GH-1 would return to GONE, which no longer exists"),
        (
            "INS-4",
            str(DEV),
            "instance i-broken can't be read: not valid JSON: Expecting property name enclosed "
            "in double quotes: line 1 column 20 (char 19)",
        ),
        (
            "INS-4",
            str(DEV),
            "instance i-newer can't be read: unknown status archived (written by a newer smllm?)",
        ),
    ]
    # the engine leaves damaged records out and still serves the readable ones
    key = json.loads(smllm(["session", "new", "--json"], project, env).out)["session"]
    shown = smllm(["session", "show", key], project, env)
    assert (shown.code, shown.err) == (0, "")
    assert "GH-1" in shown.out and "GH-2" in shown.out and "i-broken" not in shown.out
    listed = smllm(["instance", "list"], project, env)
    assert (listed.code, listed.err) == (0, "")


def test_a_store_that_cannot_be_opened(project: Path, env: dict[str, str]) -> None:
    """SQLite's file damaged or from a newer smllm (PostgreSQL's unreachable store and newer
    schema: tests/test_store_postgres.py)."""
    _two_paused(project, env)
    for wal in project.glob(".smllm/state/smllm.db-*"):
        wal.unlink()
    (project / STORE).write_bytes(b"this is not a database" * 100)
    code, found = _ins(project, env)
    assert code == 0
    # the config whose store it is, no line or path; the reason names the store
    assert [
        (f["rule"], f["level"], f["file"], f["line"], f["column"], f["path"], f["message"])
        for f in found
    ] == [
        (
            "INS-5",
            "warning",
            str(Path(".smllm") / "config.toml"),
            None,
            None,
            None,
            f"saved instances weren't checked: {project / STORE}: file is not a database",
        )
    ]
    # a store written by a newer smllm
    (project / STORE).unlink()
    db = sqlite3.connect(project / STORE)
    db.execute("PRAGMA user_version = 99")
    db.close()
    code, found = _ins(project, env)
    assert [f["message"] for f in found] == [
        f"saved instances weren't checked: {project / STORE} was written by a newer smllm"
    ]
