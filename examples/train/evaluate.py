"""Run a model through the example machine: `python examples/train/evaluate.py MODEL [--runs 10]
[--constrained on|off|both]`.

Each run is `smllm run dev --ref GH-N --model FOLDER --tools write --temperature 0.7 --seed S
--constrain on|off --json` in a fresh copy of the example project (`smllm demo`'s, by
`copy_example`) with its own XDG folders, on a ref no training run had (GH-20000 and up). Run k
has seed k (`--seed`, default 0, shifts them), so a row is repeatable. Each row is the same runs
for the trained model and for the untrained one: the same config, initialised at random
(`--untrained off` leaves it out).

For each run: did it complete (the summary's stop is `complete`), were no ACTs refused (its
`acts.refused` is 0), and was the budget kept: every turn's THINK within `--think`'s limit (256)
and its generated ids within `--max-new-tokens` (256), read from the run's transcript
(`run-1.turns.jsonl`).
The table goes to stdout; `--json FILE` keeps every run's summary too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TEMPERATURE = 0.7
THINK = 256
MAX_NEW = 256
MAX_TURNS = 12
FIRST_REF = 20000


@dataclass(frozen=True)
class Outcome:
    """One run's figures."""

    model: str
    constrain: str
    seed: int
    ref: str
    exit_code: int
    stop: str
    turns: int
    refused: int
    budget_kept: bool
    seconds: float
    #: what `smllm run --json` printed
    summary: dict[str, Any]

    @property
    def completed(self) -> bool:
        return self.stop == "complete"


def untrained_copy(model: Path, folder: Path, seed: int) -> Path:
    """`model`'s config initialised at random (seeded) with its tokenizer, saved in `folder`."""
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)
    config = transformers.AutoConfig.from_pretrained(str(model), local_files_only=True)
    fresh = transformers.AutoModelForCausalLM.from_config(config)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    fresh.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def budget_kept(turns: list[dict[str, Any]], think: int, ids: Any) -> bool:
    """Every turn's THINK ids within `think` and its generated ids within MAX_NEW (not counting
    the `<|eot|>` the runtime puts after a transmission it cut at MAX_NEW)."""
    from smllm.smi.tokens import MODEL_SIDE, Kind

    opens = {ids[k] for k in (*MODEL_SIDE, Kind.EOT)}
    for turn in turns:
        generated = turn["generated"]
        if len(generated) > MAX_NEW + (generated[-1:] == [ids[Kind.EOT]]):
            return False
        thinking, spent = False, 0
        for i in generated:
            if i in opens:
                thinking = i == ids[Kind.THINK]
            elif thinking:
                spent += 1
        if spent > think:
            return False
    return True


def one_run(model: Path, label: str, constrain: str, seed: int, base: Path, ids: Any) -> Outcome:
    """`smllm run dev` with `model` in a fresh example project under `base`."""
    from smllm.cli.demo import copy_example

    project = base / "project"
    project.mkdir(parents=True)
    copy_example(str(project))
    env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(base / name.lower())
    env.update({"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    ref = f"GH-{FIRST_REF + seed}"
    args = ["run", "dev", "--ref", ref, "--model", str(model), "--tools", "write"]
    args += ["--temperature", str(TEMPERATURE), "--seed", str(seed), "--constrain", constrain]
    args += ["--think", f"adaptive:{THINK}", "--max-new-tokens", str(MAX_NEW)]
    args += ["--max-turns", str(MAX_TURNS), "--json"]
    started = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "-m", "smllm", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = round(time.monotonic() - started, 1)
    if not ran.stdout.startswith("{") or "Traceback" in ran.stderr:
        raise RuntimeError(f"{label} seed {seed}: exit {ran.returncode}: {ran.stderr[-2000:]}")
    summary = json.loads(ran.stdout)
    lines = Path(summary["transcript"]).read_text().splitlines()
    turns = [json.loads(line) for line in lines]
    return Outcome(
        label,
        constrain,
        seed,
        ref,
        ran.returncode,
        summary["stop"],
        summary["turns"],
        summary["acts"]["refused"],
        budget_kept(turns, THINK, ids),
        seconds,
        summary,
    )


def table(outcomes: list[Outcome], runs: int) -> str:
    """The figures as a Markdown table, a row per model and constraint."""
    rows = ["| model | constraint | completed | no refused ACT | budget kept |"]
    rows.append("|---|---|---|---|---|")
    keys = dict.fromkeys((o.model, o.constrain) for o in outcomes)
    for model, constrain in keys:
        mine = [o for o in outcomes if (o.model, o.constrain) == (model, constrain)]
        done = sum(o.completed for o in mine)
        clean = sum(o.refused == 0 for o in mine)
        kept = sum(o.budget_kept for o in mine)
        rows.append(f"| {model} | {constrain} | {done}/{runs} | {clean}/{runs} | {kept}/{runs} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="train.py's model folder")
    parser.add_argument("--runs", type=int, default=10, help="seeded runs a row (default 10)")
    parser.add_argument("--constrained", choices=["on", "off", "both"], default="both")
    parser.add_argument("--untrained", choices=["on", "off"], default="on")
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--keep", action="store_true", help="keep the runs' folders (a temp dir)")
    args = parser.parse_args(argv)
    import transformers

    from smllm.smi.vocab.install import find_tokens

    started = time.monotonic()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(args.model), local_files_only=True)
    ids = find_tokens(tokenizer)
    work = Path(tempfile.mkdtemp(prefix="smllm-evaluate-"))
    try:
        models = {"trained": args.model.resolve()}  # each run has a project of its own as cwd
        if args.untrained == "on":
            models["untrained"] = untrained_copy(args.model, work / "untrained", args.seed)
        constraints = ["on", "off"] if args.constrained == "both" else [args.constrained]
        cases = [
            (label, folder, c, args.seed + k)
            for label, folder in models.items()
            for c in constraints
            for k in range(args.runs)
        ]

        def play(case: tuple[str, Path, str, int]) -> Outcome:
            label, folder, constrain, seed = case
            base = work / f"{label}-{constrain}-{seed}"
            return one_run(folder, label, constrain, seed, base, ids)

        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            outcomes = list(pool.map(play, cases))
    finally:
        if args.keep:
            print(f"the runs' folders: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(table(outcomes, args.runs))
    seconds = round(time.monotonic() - started, 1)
    print(f"{len(outcomes)} runs in {seconds} s", flush=True)
    if args.json:
        value = {"runs": args.runs, "seconds": seconds, "outcomes": [asdict(o) for o in outcomes]}
        args.json.write_text(json.dumps(value, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
