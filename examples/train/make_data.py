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

Refs (1 to 5 digits, never evaluate.py's GH-20000 to GH-20999), params, texts, THINK and OUT
blocks and the ACT ids (six random characters, so a sampling model never repeats one within a
session) vary. Every run's conversation (`run-N.smi.jsonl`) is then compiled with the project's
compiler (`smllm smi compile`) into `input_ids`, `labels` (on the model's blocks only) and
`assistant_mask`. The mistakes (an event fired before its file exists, a version the engine
refuses) stay in the conversation, so the model reads the engine's answer and learns the
recovery, but their transmissions' labels are dropped: the model isn't taught to make them.

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
#: the longest token, in bytes: constrained decoding (llguidance) takes tokens of 1,024 at most
MAX_TOKEN = 512

#: the blocks only the model writes (a transmission of these is one of its turns)
MODEL_BLOCKS = {"think", "out", "act"}

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


#: refs evaluate.py runs (GH-20000 and up): never a training episode's
HELD_OUT = range(20000, 21000)


def ref_number(rng: random.Random) -> int:
    """An issue or document number of 1 to 5 digits, outside HELD_OUT."""
    while True:
        number = rng.randint(1, 10 ** rng.randint(1, 5) - 1)
        if number not in HELD_OUT:
            return number


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
    #: the turns that are mistakes (an event fired too early, a value the engine refuses): in
    #: the transcript, so the model sees the engine's answer and learns the recovery, but not
    #: learnt themselves (their labels are dropped)
    mistakes: set[int] = field(default_factory=set)
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
        turns = [first, s.turn(plan, s.act("planned", size=size), opening=OPENINGS), done]
        runs = [Run(turns, mistakes={0})]
    elif kind == "split":
        runs = [Run([s.turn(plan, opening=OPENINGS), s.turn(s.act("planned", size=size)), done])]
    else:  # stopped by --max-turns in WORK, continued with --session
        first = Run([s.turn(plan, s.act("planned", size=size))], ["--max-turns", "1"])
        first.ends = (1, "max-turns")
        runs = [first, Run([done])]
    runs[-1].turns.append(s.final(SUMMARIES))
    return Episode("dev", f"GH-{ref_number(rng)}", runs)


def review_episode(rng: random.Random) -> Episode:
    s = Speaker(rng)

    def draft() -> Block:
        return s.act("write", path="DRAFT.md", content=rng.choice(DRAFTS))

    title = rng.choice(TITLES)
    first: list[Turn] = []
    early = rng.random() < 0.25
    if early:  # drafted before DRAFT.md: the guard is false
        first.append(s.turn(s.act("drafted", title=title)))
    first.append(s.turn(draft(), s.act("drafted", title=title)))
    wait = s.act("yield", note="waiting for the review")
    first.append(s.turn(wait))
    runs = [Run(first, ends=(0, "yield"), mistakes={0} if early else set())]
    if rng.random() < 0.3:  # rejected: a second round, a second yield
        again = [s.turn(s.act("rejected", reason=rng.choice(REASONS)))]
        again += [s.turn(draft(), s.act("drafted", title=title)), s.turn(s.act("yield"))]
        runs.append(Run(again, ends=(0, "yield")))
    runs.append(Run([s.turn(s.act("approved")), s.final(PUBLISHED)]))
    return Episode("review", f"DOC-{ref_number(rng)}", runs)


def release_episode(rng: random.Random) -> Episode:
    s = Speaker(rng)
    notes = s.act("write", path="NOTES.md", content=rng.choice(NOTES) + "\n")
    version = f"{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
    turns = [s.turn(notes, s.act("checked", risk=rng.choice(["low", "medium", "high"])))]
    mistakes = set()
    if rng.random() < 0.5:  # the engine refuses a version without its v; the next turn fixes it
        mistakes.add(len(turns))
        turns.append(s.turn(s.act("tagged", version=version)))
    turns += [s.turn(s.act("tagged", version=f"v{version}")), s.final(ANNOUNCED)]
    return Episode("release", f"REL-{ref_number(rng)}", [Run(turns, mistakes=mistakes)])


#: each machine's episode maker and its share of the episodes
MAKERS = {"dev": (dev_episode, 5), "review": (review_episode, 1), "release": (release_episode, 1)}


def episodes(count: int, seed: int, machines: tuple[str, ...] = tuple(MAKERS)) -> list[Episode]:
    rng = random.Random(seed)
    makers = [MAKERS[m][0] for m in machines for _ in range(MAKERS[m][1])]
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


def play(episode: Episode, base: Path) -> list[tuple[str, set[int]]]:
    """Every run of `episode` in a fresh project under `base`; its conversations' files, each
    with its run's mistakes."""
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
        files.append((summary["transcript"].replace(".turns.jsonl", ".smi.jsonl"), run.mistakes))
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


def spans(mask: list[int]) -> list[tuple[int, int]]:
    """The [start, end) runs of 1s in an assistant mask: the model's transmissions, in order."""
    found: list[tuple[int, int]] = []
    for n, bit in enumerate(mask):
        if bit and (n == 0 or not mask[n - 1]):
            found.append((n, n))
        if bit:
            found[-1] = (found[-1][0], n + 1)
    return found


def drop_mistakes(row: dict[str, Any], mistakes: set[int], turns: int) -> int:
    """Drop the labels of the mistaken transmissions in a compiled row; how many ids that was."""
    found = spans(row["assistant_mask"])
    if len(found) != turns:
        raise RuntimeError(f"{len(found)} model transmissions compiled for {turns} turns")
    dropped = 0
    for n in mistakes:
        start, end = found[n]
        row["labels"][start:end] = [-100] * (end - start)
        dropped += end - start
    return dropped


def compile_runs(out: Path, files: list[tuple[str, set[int]]]) -> dict[str, Any]:
    """Train the tokenizer on the conversations' text, compile them with it (`smllm smi
    compile`) into OUT/train.jsonl, the mistakes' labels dropped; the data's figures."""
    names = [name for name, _ in files]
    (out / "runs.txt").write_text("".join(f"{f}\n" for f in names))
    make_tokenizer(texts_of(names), out / "tokenizer")
    compiled = smllm(
        ["smi", "compile", str(out / "tokenizer"), *names, "-o", str(out / "train.jsonl")],
        out,
        dict(os.environ),
    )
    if compiled.returncode != 0:
        raise RuntimeError(f"smllm smi compile failed: {compiled.stderr}")
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    dropped = 0
    for row, (name, mistakes) in zip(rows, files, strict=True):
        conversation = json.loads(Path(name).read_text())["transmissions"]
        turns = sum(t[0]["type"] in MODEL_BLOCKS for t in conversation)
        dropped += drop_mistakes(row, mistakes, turns)
    (out / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lengths = [len(r["input_ids"]) for r in rows]
    return {
        "transcripts": len(rows),
        "tokens": sum(lengths),
        "labelled_tokens": sum(sum(r["assistant_mask"]) for r in rows) - dropped,
        "mistakes": {"transmissions": sum(len(m) for _, m in files), "ids": dropped},
        "longest": max(lengths),
        "vocab": VOCAB,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the data folder to write")
    parser.add_argument("--episodes", type=int, default=600, help="default 600")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--machines", default="dev,review,release", help="the machines played (default: all)"
    )
    parser.add_argument("--workers", type=int, default=2, help="runs at a time (default 2)")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()  # the runs read their scripts from their own projects
    started = time.monotonic()
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    machines = tuple(m for m in args.machines.split(",") if m)
    unknown = sorted(set(machines) - set(MAKERS))
    if unknown or not machines:
        parser.error(f"--machines: one or more of {', '.join(MAKERS)} (not {unknown})")
    todo = episodes(args.episodes, args.seed, machines)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        done = list(pool.map(lambda ie: play(ie[1], work / f"e{ie[0]:04d}"), enumerate(todo)))
    files = [f for episode in done for f in episode]
    played = time.monotonic() - started
    stats = compile_runs(out, files)
    stats["episodes"] = {m: sum(e.machine == m for e in todo) for m in machines}
    stats["seconds"] = {"runs": round(played, 1), "total": round(time.monotonic() - started, 1)}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
