"""The training recipe of examples/train/ (issue 25, docs/smi/train.md), reduced: transcripts
from `smllm run`'s scripted backend through three machines, compiled by `smllm smi compile`; a
tiny GPT-2 trained on them for a short while; then `smllm run dev --model FOLDER` on fresh refs,
sampling at temperature 0.7 under constrained decoding, three seeded runs, at least one of which
completes the example machine by the model's own choices. The full version's figures are in
reports/train.md.

The three commands run as a model person runs them, each in a process of its own; each makes its
projects and XDG folders under the test's own temp folders.

Not in CI yet (issue 25 is open): the trained model completes about half of its runs, so three
runs miss in about one CI run of eight. It moves to tests/smi/ once the recipe reaches its
target; run it by hand with `python -m pytest examples/train/test_recipe_reduced.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RECIPE = Path(__file__).resolve().parent
EPISODES = 60
MINUTES = 1.5
RUNS = 3


def recipe(step: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python examples/train/STEP.py ARGS`, offline, its XDG folders under `cwd`."""
    env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(cwd / name.lower())
    env["HF_HUB_OFFLINE"] = "1"
    command = [sys.executable, str(RECIPE / f"{step}.py"), *args]
    ran = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert ran.returncode == 0, f"{step}: exit {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
    assert "Traceback" not in ran.stderr, ran.stderr
    return ran


def test_a_model_trained_on_run_transcripts_completes_the_example_machine(tmp_path: Path) -> None:
    started = time.monotonic()
    data, model, figures = tmp_path / "data", tmp_path / "model", tmp_path / "figures.json"

    recipe("make_data", str(data), "--episodes", str(EPISODES), cwd=tmp_path)
    stats = json.loads((data / "stats.json").read_text())
    assert set(stats["episodes"]) == {"dev", "review", "release"}
    assert all(stats["episodes"].values()), stats  # each machine played
    assert stats["transcripts"] > EPISODES  # continuations are runs of their own
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    assert len(rows) == stats["transcripts"]
    for row in rows:  # labels on the model's side only: exactly where the mask is set
        assert list(row) == ["input_ids", "labels", "assistant_mask"]
        labelled = [label != -100 for label in row["labels"]]
        assert labelled == [bool(m) for m in row["assistant_mask"]] and any(labelled)

    recipe("train", str(data), str(model), "--minutes", str(MINUTES), cwd=tmp_path)
    trained = json.loads((model / "training.json").read_text())
    assert trained["steps"] > 0 and trained["loss"]["last"] < trained["loss"]["first"], trained
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in model.iterdir()
    }

    args = ["--runs", str(RUNS), "--constrained", "on", "--untrained", "off"]
    ran = recipe("evaluate", str(model), *args, "--json", str(figures), cwd=tmp_path)
    assert ran.stdout.startswith("| model | constraint | completed |"), ran.stdout
    outcomes: list[dict[str, Any]] = json.loads(figures.read_text())["outcomes"]
    assert [(o["model"], o["constrain"], o["seed"]) for o in outcomes] == [
        ("trained", "on", seed) for seed in range(RUNS)
    ]
    for o in outcomes:
        summary = o["summary"]
        assert summary["machine"] == "dev" and summary["ref"] == o["ref"]
        # every run ends the way the engine decides, never in a model error
        assert (summary["stop"], o["exit_code"]) in {
            ("complete", 0),
            ("yield", 0),
            ("paused", 0),
            ("idle", 0),
            ("runaway", 1),
            ("max-turns", 1),
            ("context-full", 1),
        }, summary
        assert o["budget_kept"], o
    completed = [o["summary"] for o in outcomes if o["summary"]["stop"] == "complete"]
    assert completed, [o["summary"] for o in outcomes]
    for summary in completed:
        said = f"completed issue {summary['ref']}"
        assert (summary["state"], summary["message"]) == ("DONE", said)
        assert summary["events"] >= 2  # planned (its guard true) and done, at least
    assert time.monotonic() - started < 240
