"""The training recipe of examples/train/ (issue 25, docs/smi/train.md), reduced: transcripts
from `smllm run`'s scripted backend, compiled by `smllm smi compile`; a tiny GPT-2 trained on
them for a fixed number of steps; then `smllm run dev --model FOLDER` on fresh refs, sampling at
temperature 0.7 under constrained decoding, three seeded runs, at least one of which completes
the example machine by the model's own choices. The full version's figures are in
reports/train.md.

Reduced: 100 episodes of the dev machine alone (a two-minute model trained on all three machines
confuses their files: it wrote NOTES.md, the release machine's, in dev), 600 steps on two torch
threads, three runs; the two other machines' episodes are made and compiled too, and checked,
but not trained on. A fixed number of steps (not a time) makes the model the same on a slower
or busier machine, and the seeded runs repeat, so the outcome doesn't depend on the machine's
speed; its time is measured, not asserted (issue 25 allows CI four minutes: it took 83 to 95 s
on two free cores here; two threads on busy cores wait on each other's barriers, and the
training then takes several times longer). Here, the 600-step model completed 19 of 20 seeded
runs. The model does depend on the arithmetic: trained on one thread, the same steps gave a
model that completed 9 of 20.

The commands run as a model person runs them, each in a process of its own; each makes its
projects and XDG folders under the test's own temp folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "train"
EPISODES = 100
STEPS = 600
RUNS = 3


def recipe(step: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python examples/train/STEP.py ARGS`, offline, its XDG folders under `cwd`."""
    env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(cwd / name.lower())
    env["HF_HUB_OFFLINE"] = "1"
    command = [sys.executable, str(RECIPE / f"{step}.py"), *args]
    ran = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1500, check=False
    )
    assert ran.returncode == 0, f"{step}: exit {ran.returncode}\n{ran.stdout}\n{ran.stderr}"
    assert "Traceback" not in ran.stderr, ran.stderr
    return ran


def compiled(data: Path, machines: set[str], episodes: int) -> dict[str, Any]:
    """make_data.py's figures for `data`, checked against its rows: every machine played,
    continuations compiled as runs of their own, labels on the model's side only, less the
    mistakes' transmissions (some in every data set)."""
    stats: dict[str, Any] = json.loads((data / "stats.json").read_text())
    assert set(stats["episodes"]) == machines and all(stats["episodes"].values()), stats
    assert sum(stats["episodes"].values()) == episodes
    assert stats["transcripts"] > episodes  # continuations are runs of their own
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    assert len(rows) == stats["transcripts"]
    dropped = 0
    for row in rows:
        assert list(row) == ["input_ids", "labels", "assistant_mask"]
        labels, mask = row["labels"], row["assistant_mask"]
        assert all(m for label, m in zip(labels, mask, strict=True) if label != -100)
        assert any(label != -100 for label in labels)
        dropped += sum(m and label == -100 for label, m in zip(labels, mask, strict=True))
    assert stats["mistakes"]["transmissions"] > 0 and dropped == stats["mistakes"]["ids"] > 0
    assert stats["labelled_tokens"] == sum(label != -100 for row in rows for label in row["labels"])
    return stats


def test_a_model_trained_on_run_transcripts_completes_the_example_machine(tmp_path: Path) -> None:
    data, model, figures = tmp_path / "data", tmp_path / "model", tmp_path / "figures.json"

    others = tmp_path / "others"
    recipe(
        "make_data", str(others), "--episodes", "12", "--machines", "review,release", cwd=tmp_path
    )
    compiled(others, {"review", "release"}, 12)
    recipe("make_data", str(data), "--episodes", str(EPISODES), "--machines", "dev", cwd=tmp_path)
    compiled(data, {"dev"}, EPISODES)

    # the time allowed is only a cap, far above the steps' need: the model is the steps'
    train = ["--steps", str(STEPS), "--threads", "2", "--minutes", "20"]
    recipe("train", str(data), str(model), *train, cwd=tmp_path)
    trained = json.loads((model / "training.json").read_text())
    assert trained["steps"] == STEPS, trained
    assert trained["loss"]["last"] < trained["loss"]["first"] / 4, trained
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
