"""The PostgreSQL store itself: a first smoke test on the real server."""

from __future__ import annotations

from pathlib import Path

from conftest import enter_args, smllm


def test_enter_and_list(store_project: Path, env: dict[str, str], backend: str) -> None:
    key = smllm(["session", "new", "--json"], store_project, env).out
    import json

    key = json.loads(key)["session"]
    ran = smllm(enter_args(key, "GH-12"), store_project, env)
    assert ran.code == 0, ran.err
    listed = smllm(["instance", "list"], store_project, env)
    assert "GH-12" in listed.out
    assert (store_project / ".smllm" / "state").exists() == (backend == "sqlite")
