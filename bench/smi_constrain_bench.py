"""Constrained decoding's figures (issue 21, item 2), run by `smi_bench.py --constrain` (and
at a small size by tests/smi/test_constrain_sampling.py):

- malformed or undeclared ACTs in N sampled turns (temperature 1, seeded) of a tiny random
  model tilted toward structure, with the constraint and without (target: 0 with it);
- a runtime turn with the constraint against one without, on the tiny Mamba2 (>= 90 % as fast);
- the mask's cost per token (compute the grammar's mask and apply it to torch logits) at the
  RWKV world vocabulary's 65,562 ids, more than the 50k of the target (<= 100 us, median).

Why tilted: a random model puts ~1/V of its mass on each block id, so its blocks run for
hundreds of ids and ACTs are rare; one trained on SMI puts its mass on structure. The tilt adds
`TILT` to the logits of `<|think|>`, `<|out|>` and `<|act|>` and `EOT_TILT` to `<|eot|>`'s (a
forward hook on the output layer), so turns are short and about one block in three is an ACT.
Both runs see the same model, seeds and transmission.

Why no turn is cut mid-ACT: the tools' schemas are bounded (an enum, a string of at most 16
characters, an integer in 1..600) and the grammar bounds ACT ids to 32 characters, so a
constrained ACT ends within a few dozen ids, and `max_new_tokens` is ample; the tally counts
turns the runtime cut anyway (`cut`), and a cut turn's ACT refusals apart (`cut_refused`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: refusals that say the ACT itself was wrong (malformed or undeclared), not the session's state
MALFORMED = frozenset(
    {
        "malformed_action",
        "missing_id",
        "unknown_capability",
        "invalid_arguments",
        "schema_violation",
    }
)
#: what the tilt adds to the logits of the model-side block ids, and of `<|eot|>` (more, so a
#: turn holds one or two blocks, as a trained model's would)
TILT = 5.0
EOT_TILT = 6.0
TOOLS: dict[str, Any] = {
    "tools": [
        {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 16}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
        {
            "name": "bash",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"enum": ["ls", "pytest", "git status"]},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": 600},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    ]
}


@dataclass
class Tally:
    """What N sampled turns gave: ACTs, their refusals by type, turns the runtime cut."""

    turns: int = 0
    ids: int = 0
    acts: int = 0
    ran: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    cut: int = 0
    cut_refused: int = 0
    seconds: float = 0.0

    @property
    def malformed(self) -> int:
        """Malformed or undeclared ACTs in turns the model ended itself."""
        return sum(n for kind, n in self.refusals.items() if kind in MALFORMED)


def tilt(model: Any, ids: Any) -> Any:
    """`model` with `TILT` added to its output logits at the model-side block ids and
    `EOT_TILT` at `<|eot|>` (a forward hook on the output layer; returns the hook's handle)."""
    import torch

    from smllm.smi.tokens import MODEL_SIDE, Kind

    out = model.get_output_embeddings()
    bias = torch.zeros(int(out.weight.shape[0]))
    for kind in MODEL_SIDE:
        bias[ids[kind]] = TILT
    bias[ids[Kind.EOT]] = EOT_TILT

    def hook(module: Any, inputs: Any, output: Any) -> Any:
        return output + bias.to(output.device)

    return out.register_forward_hook(hook)


def ask() -> Any:
    """The runtime transmission of every sampled turn: a THINK budget, the tools, a task."""
    from smllm.smi.stream import Block, Transmission

    return Transmission.of(
        [
            Block.of("ctrl", {"reasoning": {"mode": "adaptive", "max_tokens": 24}}),
            Block.of("caps", TOOLS),
            Block.of("usr", "Read src/auth.py, then run the tests."),
        ]
    )


def sampled_turns(
    model: Any,
    tokenizer: Any,
    turns: int,
    *,
    constrain: bool,
    seed: int = 0,
    max_new_tokens: int = 1024,
) -> Tally:
    """`turns` sampled turns (temperature 1; session n seeded `seed + n`, a fresh session
    each, so ACT ids never repeat across turns) through `hf_runtime`, tallied."""
    from smllm.smi.assemble import hf_runtime
    from smllm.smi.backends import Sampler

    def run(action: Any, session: Any) -> tuple[bool, Any]:
        return True, "ok"

    runtime = hf_runtime(
        model,
        tokenizer,
        sampler=Sampler(temperature=1.0),
        constrain=constrain,
        max_new_tokens=max_new_tokens,
        actions=run,
        generate_in_thread=False,
    )
    message = ask()
    tally = Tally()
    started = time.perf_counter()
    for n in range(turns):
        result = asyncio.run(runtime.session(seed=seed + n).turn(message))
        tally.turns += 1
        tally.ids += len(result.generated)
        tally.acts += len(result.refusals)
        refused = [r.type for r in result.refusals if r is not None]
        tally.ran += len(result.refusals) - len(refused)
        if result.truncated:
            tally.cut += 1
            tally.cut_refused += len(refused)
        else:
            tally.refusals.update(refused)
    tally.seconds = time.perf_counter() - started
    return tally


def sampled_report(turns: int) -> None:
    """The tally of `turns` sampled turns with and without the constraint, on a tiny random
    GPT-2 over the bench's ByteLevel BPE."""
    import torch
    from report import heading, verdict
    from smi_bench import train_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(1)
    heading(f"constrained decoding: ACTs in {turns} sampled turns (tiny random GPT-2, tilted)")
    tok, ids = train_tokenizer(2000)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=4096)
    model = GPT2LMHeadModel(config).eval()
    tilt(model, ids)
    tallies = {}
    for constrain in (True, False):
        tally = tallies[constrain] = sampled_turns(model, tok, turns, constrain=constrain)
        kinds = ", ".join(f"{k} {n}" for k, n in tally.refusals.most_common()) or "none"
        print(
            f"  {'with' if constrain else 'without':<7} the constraint: {tally.acts} ACTs, "
            f"{tally.ran} ran, refused: {kinds}; {tally.cut} turns cut "
            f"({tally.cut_refused} refusals there); {tally.ids / tally.turns:.0f} ids a turn, "
            f"{tally.seconds:.1f} s"
        )
    on, off = tallies[True], tallies[False]
    print(f"  {verdict(on.malformed == 0 and on.cut == 0)}  malformed with it: {on.malformed}")
    print(f"  {verdict(off.malformed > 0)}  malformed without it: {off.malformed} (info: > 0)")


class _Clock:
    """Seconds spent in the constraint: making it, and its apply / observe / allows."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def factory(self, make: Any) -> Any:
        def timed(session: Any) -> Any:
            started = time.perf_counter()
            inner = make(session)
            self.seconds += time.perf_counter() - started
            return _Timed(inner, self)

        return timed


class _Timed:
    def __init__(self, inner: Any, clock: _Clock) -> None:
        self.inner, self.clock = inner, clock

    def apply(self, logits: Any) -> Any:
        started = time.perf_counter()
        out = self.inner.apply(logits)
        self.clock.seconds += time.perf_counter() - started
        return out

    def observe(self, token_id: int) -> None:
        started = time.perf_counter()
        self.inner.observe(token_id)
        self.clock.seconds += time.perf_counter() - started

    def allows(self, token_id: int) -> bool:
        started = time.perf_counter()
        ok = bool(self.inner.allows(token_id))
        self.clock.seconds += time.perf_counter() - started
        return ok


def speed_report(new_tokens: int, runs: int) -> None:
    """A runtime turn with the constraint against the same turn without its work, on the tiny
    Mamba2 of the runtime section (greedy, tools declared). The two can't be run apart and
    compared: the grammar changes what a random model generates (its turns end elsewhere,
    and a turn's fixed costs spread over other counts), so the constraint's own time (making
    it, apply, observe) is clocked inside the turn, and "off" is the turn without it."""
    import torch
    from report import heading, verdict
    from smi_bench import tiny_mamba, train_tokenizer

    from smllm.smi.assemble import hf_runtime
    from smllm.smi.stream import Block, Transmission

    torch.set_num_threads(1)
    heading(f"constrained decoding: a runtime turn, up to {new_tokens} ids, best of {runs}")
    tok, _ = train_tokenizer(2000)
    model = tiny_mamba(len(tok))
    message = Transmission.of(
        [
            Block.of("ctrl", {"reasoning": {"mode": "fixed", "max_tokens": new_tokens // 2}}),
            Block.of("caps", TOOLS),
            Block.of("usr", "Fix the failing test in the parser, then run the tests."),
        ]
    )
    runtime = hf_runtime(model, tok, max_new_tokens=new_tokens, generate_in_thread=False)
    clock = _Clock()
    runtime.constraint = clock.factory(runtime.constraint)
    asyncio.run(runtime.session().turn(message))  # warm: the grammar is compiled once
    best, share, count = float("inf"), 0.0, 0
    for _ in range(runs):
        clock.seconds = 0.0
        started = time.perf_counter()
        count = len(asyncio.run(runtime.session().turn(message)).generated)
        took = time.perf_counter() - started
        if took < best:
            best, share = took, clock.seconds / took
    per_id = clock.seconds / count * 1e6
    print(f"  constraint on: {count / best:.0f} tok/s ({count} ids)")
    print(f"  the constraint's share of the turn: {share:.1%} ({per_id:.0f} us an id, made too)")
    print(
        f"  {verdict(1 - share >= 0.90)}  on >= 90 % of off (that turn without it): {1 - share:.1%}"
    )


def mask_figures(turns: int) -> tuple[list[float], list[float]]:
    """The per-id cost (seconds) of `GrammarConstraint.apply` over `turns` canonical model
    transmissions (THINK, OUT, a tool call) on the RWKV world vocabulary: the first turn's
    (masks not yet cached) and the later turns'."""
    import torch

    from smllm.smi.caps import Capabilities
    from smllm.smi.compile import Compiler
    from smllm.smi.constrain import Constrainer
    from smllm.smi.stream import Block, Reasoning, Transmission
    from smllm.smi.vocab.trie import TrieEncoder

    encoder = TrieEncoder()
    constrainer = Constrainer.for_trie(encoder)
    caps = Capabilities.from_value(TOOLS)
    reasoning = Reasoning("adaptive", None, 256)
    compiler = Compiler(encoder, encoder.ids)
    logits = torch.randn(constrainer.vocab_size)
    first: list[float] = []
    later: list[float] = []
    for n in range(turns):
        act = {"id": f"a{n}", "type": "tool", "name": "read_file", "arguments": {"path": "a.py"}}
        model = Transmission.of(
            [
                Block.of("think", f"The test {n} compares seconds with milliseconds; read it."),
                Block.of("out", "Reading the file first."),
                Block.of("act", act),
            ]
        )
        ids = compiler.compile([model]).ids[:-1]  # the "\n" after <|eot|> is the runtime's
        constraint = constrainer.for_turn(caps, reasoning)
        times = first if n == 0 else later
        for token in ids:
            step = logits.clone()
            started = time.perf_counter()
            masked = constraint.apply(step)
            times.append(time.perf_counter() - started)
            if not masked[token] > float("-inf"):
                raise AssertionError(f"the grammar forbade id {token} of a canonical turn")
            constraint.observe(token)
        if constraint.yielded:
            raise AssertionError("the grammar gave way on a canonical turn")
    return first, later


def mask_report(turns: int) -> None:
    import torch
    from report import heading, verdict

    torch.set_num_threads(1)
    heading(f"constrained decoding: the mask's cost per id, RWKV world vocabulary, {turns} turns")
    first, later = mask_figures(turns)
    cold, warm = statistics.median(first) * 1e6, statistics.median(later) * 1e6
    p90 = sorted(later)[int(0.9 * len(later))] * 1e6
    print(f"  first turn (masks not yet cached): median {cold:.0f} us over {len(first)} ids")
    print(f"  later turns: median {warm:.0f} us, p90 {p90:.0f} us over {len(later)} ids")
    print(f"  {verdict(warm <= 100)}  median <= 100 us at 65,562 ids: {warm:.0f} us")


def main(quick: bool) -> None:
    sampled_report(100 if quick else 500)
    speed_report(64 if quick else 256, 2 if quick else 5)
    mask_report(5 if quick else 20)
