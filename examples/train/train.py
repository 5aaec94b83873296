"""Train a tiny model on compiled `smllm run` transcripts: `python examples/train/train.py DATA
OUT_MODEL [--minutes 10]`.

DATA is make_data.py's folder (`train.jsonl`: `input_ids`, `labels`, `assistant_mask`;
`tokenizer/`: the tokenizer with the SMI tokens). The model is a tiny GPT-2 (by default hidden
128, 4 layers, 4 heads, 1,024 positions) initialised at random, trained with a plain PyTorch loop
(AdamW, a short warm-up then a cosine decay over the time allowed) on the labels alone, the
model's side of each conversation. It stops when the time is up and saves a Hugging Face folder
(weights, config, the tokenizer) that `smllm run --model OUT_MODEL` loads offline, with
`training.json` saying what was done.

One torch thread by default: on two cores that other work shares, two threads wait on each
other's barriers, and a step took 1.7 s instead of 0.37 s with one. `--threads 2` where the
cores are free (0.13 s a step instead of 0.21 s). `--steps N` trains exactly N steps, the decay
over the steps, so the model doesn't depend on the machine's speed (the time only caps it).

`--family mamba` trains a Mamba of the same width instead. On CPU transformers runs Mamba's
selective scan as a Python loop over the positions (no CUDA kernels), so one step over a 1,300-id
conversation takes seconds where GPT-2's takes a fraction of one: too slow for the 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

IGNORE = -100


def build_model(
    family: str, vocab: int, hidden: int, layers: int, positions: int, eos: int, dropout: float
) -> Any:
    """A random-initialised tiny causal LM over `vocab` ids."""
    import transformers

    if family == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=vocab,
            n_embd=hidden,
            n_layer=layers,
            n_head=max(1, hidden // 32),
            n_positions=positions,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
            bos_token_id=eos,
            eos_token_id=eos,
        )
        return transformers.GPT2LMHeadModel(config)
    if family == "mamba":
        config = transformers.MambaConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            num_hidden_layers=layers,
            state_size=16,
            bos_token_id=eos,
            eos_token_id=eos,
            pad_token_id=eos,
        )
        return transformers.MambaForCausalLM(config)
    raise ValueError(f"no family {family!r} (gpt2 or mamba)")


def batches(rows: list[dict[str, Any]], size: int, rng: random.Random) -> list[list[int]]:
    """Indices of `rows` in batches of similar length (less padding), in a random order."""
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i]["input_ids"]), rng.random()))
    groups = [order[i : i + size] for i in range(0, len(order), size)]
    rng.shuffle(groups)
    return groups


def tensors(rows: list[dict[str, Any]], pad: int) -> tuple[Any, Any, Any]:
    """input_ids, attention_mask and labels of `rows`, padded on the right."""
    import torch

    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    for n, row in enumerate(rows):
        length = len(row["input_ids"])
        ids[n, :length] = torch.tensor(row["input_ids"])
        mask[n, :length] = 1
        labels[n, :length] = torch.tensor(row["labels"])
    return ids, mask, labels


def learning_rate(peak: float, progress: float, step: int, warmup: int = 20) -> float:
    """A linear warm-up over `warmup` steps, then a cosine decay to 10% as time (or the steps
    allowed) runs out."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="make_data.py's folder")
    parser.add_argument("out", type=Path, help="the model folder to write")
    parser.add_argument("--minutes", type=float, default=10.0, help="training time (default 10)")
    parser.add_argument("--family", choices=["gpt2", "mamba"], default="gpt2")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--positions", type=int, default=1024, help="GPT-2's context")
    parser.add_argument(
        "--steps", type=int, help="train this many steps (a repeatable run; --minutes caps it)"
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dropout", type=float, default=0.1, help="GPT-2's (default 0.1)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    import transformers

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        str(args.data / "tokenizer"), local_files_only=True
    )
    lines = (args.data / "train.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    too_long = [len(r["input_ids"]) for r in rows if len(r["input_ids"]) > args.positions]
    if too_long and args.family == "gpt2":
        raise SystemExit(f"{len(too_long)} conversations longer than --positions {args.positions}")
    pad = int(tokenizer.eos_token_id)
    model = build_model(
        args.family, len(tokenizer), args.hidden, args.layers, args.positions, pad, args.dropout
    )
    parameters = sum(p.numel() for p in model.parameters())
    print(f"{args.family}: {parameters:,} parameters; {len(rows)} conversations", flush=True)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    allowed = args.minutes * 60
    started = time.monotonic()
    step, epoch, seen, losses = 0, 0, 0, []
    model.train()
    while time.monotonic() - started < allowed and step != args.steps:
        epoch += 1
        for group in batches(rows, args.batch, rng):
            elapsed = time.monotonic() - started
            if elapsed >= allowed or step == args.steps:
                break
            for g in optimiser.param_groups:
                # with --steps, the schedule follows the steps alone: the same steps give the
                # same model on a slower or busier machine (the time is then only a cap)
                progress = step / args.steps if args.steps else elapsed / allowed
                g["lr"] = learning_rate(args.lr, progress, step)
            ids, mask, labels = tensors([rows[i] for i in group], pad)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            step, seen = step + 1, seen + len(group)
            losses.append(float(loss.detach()))
            if step % 25 == 0:
                recent = sum(losses[-25:]) / len(losses[-25:])
                print(f"step {step} epoch {epoch} loss {recent:.3f} {elapsed:.0f} s", flush=True)
    seconds = time.monotonic() - started
    model.eval()
    transformers.utils.logging.disable_progress_bar()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(args.out))
    tokenizer.save_pretrained(str(args.out))
    tail = losses[-25:] or [float("nan")]
    report = {
        "family": args.family,
        "parameters": parameters,
        "config": {
            "hidden": args.hidden,
            "layers": args.layers,
            "positions": args.positions,
            "dropout": args.dropout,
        },
        "conversations": len(rows),
        "tokens": sum(len(r["input_ids"]) for r in rows),
        "steps": step,
        "epochs": round(seen / len(rows), 2),
        "seconds": round(seconds, 1),
        "loss": {"first": round(losses[0], 3) if losses else None, "last": sum(tail) / len(tail)},
        "threads": args.threads,
    }
    (args.out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
