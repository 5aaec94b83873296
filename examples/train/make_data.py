"""Training data from `smllm run` transcripts: `python examples/train/make_data.py OUT`.

Plays a few hundred varied episodes with the scripted backend (`smllm run MACHINE --backend
scripted:FILE`, one process per run) through three machines, each in a throw-away project of its
own:

- `dev`, the example machine (`smllm demo`'s project, copied by `copy_example`): write PLAN.md
  and fire `planned` in one turn or two; fire `planned` before PLAN.md exists (the guard is
  false, PLAN is re-entered) and then write it; stop at `--max-turns 1` in WORK and continue with
  `smllm run --session KEY`;
- `review` (machines/review.smllm.yaml): write a draft, `drafted`, then `yield` while a person
  reviews; `--session KEY` continues with `approved`, or `rejected` and a second round;
- `release` (machines/release.smllm.yaml): notes, `checked` with a risk, `tagged` with a version
  whose pattern the engine checks: some runs first tag `1.4.0`, which the engine refuses (an
  `ok: false` OBS), and recover with `v1.4.0`.

Refs, params, texts, THINK and OUT blocks and the ACT ids (six random characters, so a sampling
model never repeats one within a session) vary. Every run's conversation (`run-N.smi.jsonl`) is
then compiled with the project's compiler (`smllm smi compile`) into `input_ids`, `labels` (on
the model's blocks only) and `assistant_mask`.

The tokenizer is a ByteLevel BPE (4,096 ids, merges across words) trained here on the
transcripts' text, with the SMI tokens installed (`smllm.smi.vocab.install.install_tokens`): it
trains in seconds, covers every byte (fresh refs and session keys still encode), and makes a
conversation ~50x shorter than the scripted backend's byte vocabulary (~5,500 ids a dev run),
~20x shorter than the same BPE split at words: what makes training fit in minutes on two cores.
(The byte vocabulary is no Hugging Face tokenizer either, so `--model` couldn't load it.)

OUT gets `tokenizer/` (a Hugging Face tokenizer folder), `train.jsonl` (one compiled row per run),
`runs.txt` (the transcripts, in order) and `stats.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MACHINES = HERE / "machines"
VOCAB = 4096
#: the longest token, in bytes: llguidance (constrained decoding) panics on a token over 1,024
MAX_TOKEN = 512

Block = dict[str, Any]
Turn = list[Block]

PLANS = [
    "Rename the option and update its callers.",
    "Fix the off-by-one error in the pager.",
    "Add a test for the empty input, then handle it.",
    "Read the config once and cache it.",
    "Split the long function into two.",
    "Log the error instead of ignoring it.",
    "Remove the unused import and the dead code.",
    "Make the timeout a setting with a default of 30 s.",
    "Sort the list before printing it.",
    "Escape the user's text in the page.",
]
SUMMARIES = [
    "Renamed the option.",
    "Fixed the bug and added a test.",
    "The change is in; the tests pass.",
    "Done: the plan is carried out.",
    "Changed the code as PLAN.md says.",
    "The issue is fixed.",
]
THOUGHTS = [
    "The plan comes first.",
    "PLAN.md must exist before planned.",
    "Next event from the list.",
    "Follow the instructions.",
    "One event per turn.",
]
OPENINGS = ["I will write the plan.", "Planning first.", "Writing PLAN.md.", "On it."]
TITLES = ["Getting started", "The store", "How runs work", "Sessions", "A guide to guards"]
DRAFTS = ["# Draft\n\nFirst version.\n", "Intro, usage, limits.\n", "# Notes\n\nTo review.\n"]
REASONS = ["Shorter, please.", "Add an example.", "Fix the title."]
NOTES = ["Fixes two bugs.", "A new command and its docs.", "Faster startup.", "Security fixes."]
PUBLISHED = ["Published on the docs site.", "It is live on the wiki.", "Published."]
ANNOUNCED = ["Shipped; the notes are out.", "The release is out.", "Announced the release."]


def act_id(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(6))


class Speaker:
    """Builds one run's model transmissions (native JSON form) with varied THINK/OUT blocks."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def act(self, name: str, **arguments: Any) -> Block:
        call = {"id": act_id(self.rng), "type": "tool", "name": name, "arguments": arguments}
        return {"type": "act", "json": call}

    def turn(self, *acts: Block, opening: list[str] | None = None) -> Turn:
        blocks: Turn = []
        if self.rng.random() < 0.25:
            blocks.append({"type": "think", "text": self.rng.choice(THOUGHTS)})
        if opening and self.rng.random() < 0.4:
            blocks.append({"type": "out", "text": self.rng.choice(opening)})
        return [*blocks, *acts]

    def final(self, texts: list[str]) -> Turn:
        return [{"type": "out", "text": self.rng.choice(texts)}]


@dataclass
class Run:
    """One `smllm run`: its extra options and the model's transmissions."""

    turns: list[Turn]
    options: list[str] = field(default_factory=list)
    #: the exit code and stop it must end with
    ends: tuple[int, str] = (0, "complete")


@dataclass
class Episode:
    machine: str
    ref: str
    runs: list[Run]


def dev_episode(rng: random.Random) -> Episode:
    s = Speaker(rng)
    plan = s.act("write", path="PLAN.md", content=rng.choice(PLANS) + "\n")
    size = rng.choice(["small", "large"])
    kind = rng.choices(["plain", "guard", "split", "continue"], weights=[5, 2, 2, 2])[0]
    done = s.turn(s.act("done"))
    if kind == "plain":
        runs = [Run([s.turn(plan, s.act("planned", size=size), opening=OPENINGS), done])]
    elif kind == "guard":  # planned before PLAN.md: the guard is false, PLAN re-entered
        first = s.turn(s.act("planned", size=size))
        runs = [Run([first, s.turn(plan, s.act("planned", size=size), opening=OPENINGS), done])]
    elif kind == "split":
        runs = [Run([s.turn(plan, opening=OPENINGS), s.turn(s.act("planned", size=size)), done])]
    else:  # stopped by --max-turns in WORK, continued with --session
        first = Run([s.turn(plan, s.act("planned", size=size))], ["--max-turns", "1"])
        first.ends = (1, "max-turns")
        runs = [first, Run([done])]
    runs[-1].turns.append(s.final(SUMMARIES))
    return Episode("dev", f"GH-{rng.randint(1, 9999)}", runs)


def review_episode(rng: random.Random) -> Episode:
    s = Speaker(rng)

    def draft() -> Block:
        return s.act("write", path="DRAFT.md", content=rng.choice(DRAFTS))

    title = rng.choice(TITLES)
    first: list[Turn] = []
    if rng.random() < 0.25:  # drafted before DRAFT.md: the guard is false
        first.append(s.turn(s.act("drafted", title=title)))
    first.append(s.turn(draft(), s.act("drafted", title=title)))
    wait = s.act("yield", note="waiting for the review")
    first.append(s.turn(wait))
    runs = [Run(first, ends=(0, "yield"))]
    if rng.random() < 0.3:  # rejected: a second round, a second yield
        again = [s.turn(s.act("rejected", reason=rng.choice(REASONS)))]
        again += [s.turn(draft(), s.act("drafted", title=title)), s.turn(s.act("yield"))]
        runs.append(Run(again, ends=(0, "yield")))
    runs.append(Run([s.turn(s.act("approved")), s.final(PUBLISHED)]))
    return Episode("review", f"DOC-{rng.randint(1, 9999)}", runs)


def release_episode(rng: random.Random) -> Episode:
    s = Speaker(rng)
    notes = s.act("write", path="NOTES.md", content=rng.choice(NOTES) + "\n")
    version = f"{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
    turns = [s.turn(notes, s.act("checked", risk=rng.choice(["low", "medium", "high"])))]
    if rng.random() < 0.5:  # the engine refuses a version without its v; the next turn fixes it
        turns.append(s.turn(s.act("tagged", version=version)))
    turns += [s.turn(s.act("tagged", version=f"v{version}")), s.final(ANNOUNCED)]
    return Episode("release", f"REL-{rng.randint(1, 9999)}", [Run(turns)])


def episodes(count: int, seed: int) -> list[Episode]:
    rng = random.Random(seed)
    makers = [dev_episode] * 5 + [review_episode, release_episode]
    return [rng.choice(makers)(rng) for _ in range(count)]


def smllm(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "smllm", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def project_of(machine: str, folder: Path) -> None:
    """A project holding `machine` alone: dev is the example project itself."""
    from smllm.cli.demo import copy_example

    if machine == "dev":
        copy_example(str(folder))
        return
    target = folder / ".smllm"
    target.mkdir(parents=True)
    shutil.copy(MACHINES / f"{machine}.smllm.yaml", target)
    (target / "config.toml").write_text(f'[machines]\nfiles = ["{machine}.smllm.yaml"]\n')


def play(episode: Episode, base: Path) -> list[str]:
    """Every run of `episode` in a fresh project under `base`; its conversations' files."""
    project = base / "project"
    project.mkdir(parents=True)
    project_of(episode.machine, project)
    env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(base / name.lower())
    key = None
    files = []
    for n, run in enumerate(episode.runs):
        script = base / f"run-{n}.json"
        script.write_text(json.dumps({"transmissions": run.turns}))
        where = ["--session", key] if key else [episode.machine, "--ref", episode.ref]
        args = ["run", *where, "--backend", f"scripted:{script}", "--tools", "write", "--json"]
        ran = smllm([*args, *run.options], project, env)
        summary = json.loads(ran.stdout) if ran.stdout.startswith("{") else {}
        if (ran.returncode, summary.get("stop")) != run.ends or summary["acts"]["refused"] > 1:
            raise RuntimeError(f"{episode.machine} {episode.ref} run {n}: {ran.stdout}{ran.stderr}")
        key = summary["session"]
        files.append(summary["transcript"].replace(".turns.jsonl", ".smi.jsonl"))
    return files


def texts_of(files: list[str]) -> list[str]:
    """Every block's text in the conversations (the tokenizer's training corpus)."""
    out = []
    for file in files:
        for transmission in json.loads(Path(file).read_text())["transmissions"]:
            for block in transmission:
                text = block.get("text")
                out.append(text if text is not None else json.dumps(block["json"]))
    return out


def make_tokenizer(corpus: list[str], folder: Path) -> Any:
    """A ByteLevel BPE trained on `corpus`, the SMI tokens installed, saved in `folder`."""
    import transformers
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from smllm.smi.vocab.install import install_tokens

    raw = Tokenizer(models.BPE())
    # no split at words: merges may cross them, so the texts every run repeats (the agent
    # rules, the tools' descriptions, the blocks' framing) become a few long ids each; but an
    # ACT's `"id":"…"` is a piece of its own, so no id merges with the tool name after it (the
    # model would pick the name while it samples the id's last characters)
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex('"id":"[^"]*"'), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=2,
        max_token_length=MAX_TOKEN,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(corpus, trainer=trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="<|endoftext|>", eos_token="<|endoftext|>"
    )
    install_tokens(tokenizer)
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def compile_runs(out: Path, files: list[str]) -> dict[str, Any]:
    """Train the tokenizer on `files`' text, compile them with it (`smllm smi compile`) into
    OUT/train.jsonl; the data's figures."""
    (out / "runs.txt").write_text("".join(f"{f}\n" for f in files))
    make_tokenizer(texts_of(files), out / "tokenizer")
    compiled = smllm(
        ["smi", "compile", str(out / "tokenizer"), *files, "-o", str(out / "train.jsonl")],
        out,
        dict(os.environ),
    )
    if compiled.returncode != 0:
        raise RuntimeError(f"smllm smi compile failed: {compiled.stderr}")
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    lengths = [len(r["input_ids"]) for r in rows]
    return {
        "transcripts": len(rows),
        "tokens": sum(lengths),
        "labelled_tokens": sum(sum(r["assistant_mask"]) for r in rows),
        "longest": max(lengths),
        "vocab": VOCAB,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the data folder to write")
    parser.add_argument("--episodes", type=int, default=300, help="default 300")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="runs at a time (default 2)")
    args = parser.parse_args(argv)
    out: Path = args.out
    started = time.monotonic()
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    todo = episodes(args.episodes, args.seed)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        done = list(pool.map(lambda ie: play(ie[1], work / f"e{ie[0]:04d}"), enumerate(todo)))
    files = [f for episode in done for f in episode]
    played = time.monotonic() - started
    stats = compile_runs(out, files)
    stats["episodes"] = {m: sum(e.machine == m for e in todo) for m in ("dev", "review", "release")}
    stats["seconds"] = {"runs": round(played, 1), "total": round(time.monotonic() - started, 1)}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
