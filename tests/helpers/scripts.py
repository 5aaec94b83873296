"""Scripts for `smllm run --backend scripted:FILE` and reading what a run saved: the helpers
the run tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["act", "turns_of", "write_script"]


def act(act_id: str | None, name: str, **arguments: Any) -> dict[str, Any]:
    """A script's ACT block (native JSON form): tool `name` with `arguments`; no id for None."""
    call: dict[str, Any] = {} if act_id is None else {"id": act_id}
    return {"type": "act", "json": {**call, "type": "tool", "name": name, "arguments": arguments}}


def write_script(folder: Path, name: str, *turns: list[dict[str, Any]], pace: float = 0.0) -> str:
    """A script file of `turns` (one model transmission each) in `folder`; its path."""
    path = folder / name
    value: dict[str, Any] = {"transmissions": list(turns)}
    if pace:
        value["pace"] = pace
    path.write_text(json.dumps(value))
    return str(path)


def turns_of(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines of a run's `run-N.turns.jsonl` (from its `--json` summary)."""
    lines = Path(summary["transcript"]).read_text().splitlines()
    return [json.loads(line) for line in lines]
