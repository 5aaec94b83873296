"""smllm.smi's speed (issue 10), reported, not timed tests:

- compile throughput on 2,000 conversations, against the raw tokenizer's `encode_batch` of the
  same payload texts (target: >= 90 % of it), the naive path (one tokenizer call per fragment)
  and `apply_chat_template` + encode;
- the streaming parser's overhead over a plain incremental decode of the same ids (<= 5 %);
- a runtime turn with the budget processor and parser against a plain forward loop on the same
  tiny model (<= 10 % slower), and the tokens fed per turn over 50 turns (incremental vs
  re-encoding the whole history: >= 10x fewer at turn 50);
- the injection fuzz: N random hostile payloads through the compiler, none yielding a
  forbidden id (100,000 by default; --quick: 5,000);
- constrained decoding (issue 21, smi_constrain_bench.py; alone with --constrain): malformed
  ACTs in 500 sampled turns with and without it, a turn with it against one without, and the
  mask's cost per id at a 65k vocabulary.

Run: python bench/smi_bench.py [--quick]. Offline: the tokenizer is trained here.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import heading, verdict

WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "for",
    "that",
    "on",
    "with",
    "as",
    "was",
    "at",
    "by",
    "this",
    "be",
    "from",
    "or",
    "an",
    "are",
    "which",
    "def",
    "return",
    "import",
    "class",
    "self",
    "None",
    "True",
    "False",
    "if",
    "else",
    "for",
    "while",
    "try",
    "except",
    "raise",
    "with",
    "function",
    "const",
    "let",
    "var",
    "async",
    "await",
    "yield",
    "lambda",
    "value",
    "result",
    "error",
    "test",
    "file",
    "path",
    "commit",
    "branch",
    "merge",
    "review",
    "build",
    "deploy",
    "config",
    "server",
    "client",
    "request",
    "response",
    "token",
    "state",
    "model",
    "session",
    "runtime",
    "action",
    "observation",
    "think",
    "output",
    "capability",
    "budget",
    "café",
    "naïve",
    "東京",
    "данные",
    "데이터",
    "🙂",
    "✓",
    "→",
    "λ",
]


def text(rng: random.Random, low: int, high: int) -> str:
    n = rng.randint(low, high)
    out = []
    for _ in range(n):
        out.append(rng.choice(WORDS))
        out.append(rng.choice([" ", " ", " ", "\n", ", ", ". ", "\n    ", "()", " = "]))
    return "".join(out)


def conversations(n: int, seed: int = 1) -> list[tuple[list[dict[str, Any]], list[Any]]]:
    rng = random.Random(seed)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    out = []
    for _ in range(n):
        messages: list[dict[str, Any]] = [{"role": "system", "content": text(rng, 20, 60)}]
        for turn in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": text(rng, 10, 80)})
            call = {"id": f"c{turn}", "function": {"name": "bash", "arguments": {"command": "ls"}}}
            messages.append(
                {
                    "role": "assistant",
                    "reasoning_content": text(rng, 10, 60),
                    "content": text(rng, 5, 40),
                    "tool_calls": [call],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": f"c{turn}", "content": text(rng, 20, 200)}
            )
        out.append((messages, tools))
    return out


def train_tokenizer(vocab_size: int = 8000) -> Any:
    """A ByteLevel BPE trained here on the bench's own text, with the SMI tokens and a decoy."""
    import transformers
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    from smllm.smi.vocab.install import install_tokens

    rng = random.Random(0)
    corpus = [text(rng, 50, 200) for _ in range(3000)]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator(corpus, trainer)
    backend.add_tokens([AddedToken("<tool_call>", special=False)])
    transformers.logging.set_verbosity_error()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend)
    ids = install_tokens(tok)
    return tok, ids


def train_llama_tokenizer(vocab_size: int = 8000) -> Any:
    """A Llama-2-style BPE (a `▁` normaliser; Replace + ByteFallback + Fuse + Strip decoder;
    the 256 `<0xNN>` byte tokens in the vocabulary) trained on the same text."""
    import json

    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    from smllm.smi.vocab.install import install_tokens

    rng = random.Random(0)
    corpus = [text(rng, 50, 200) for _ in range(3000)]
    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    llama_decoder = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    backend.decoder = decoders.Sequence([*llama_decoder, decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"])
    backend.train_from_iterator(corpus, trainer)
    data = json.loads(backend.to_str())
    vocab = data["model"]["vocab"]
    size = len(vocab)
    vocab.update({f"<0x{b:02X}>": size + b for b in range(256)})
    data["model"]["byte_fallback"] = True
    backend = Tokenizer.from_str(json.dumps(data))
    transformers.logging.set_verbosity_error()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")
    ids = install_tokens(tok)
    return tok, ids


def best_of(fn: Any, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def compile_report(n: int, runs: int) -> None:
    from smllm.smi.compile import Compiler
    from smllm.smi.convert import from_messages
    from smllm.smi.render import pieces
    from smllm.smi.template import CHAT_TEMPLATE
    from smllm.smi.vocab.encode import PlainEncoder

    heading(f"compile: {n} conversations, ByteLevel BPE (8k), best of {runs}")
    tok, ids = train_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    compiler = Compiler(PlainEncoder.from_tokenizer(tok, ids), ids)
    data = conversations(n)
    convs = [from_messages(m, t) for m, t in data]
    texts = [p.text for c in convs for p in pieces(c) if p.text is not None]
    backend = tok.backend_tokenizer
    tokens = sum(len(c) for c in compiler.compile_batch(convs))
    payload_tokens = sum(len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False))

    compile_s = best_of(lambda: compiler.compile_batch(convs), runs)
    # the raw path's ids as Python lists, as the compiler gives them (an Encoding's .ids makes
    # the list: without it nothing could use the result)
    raw_s = best_of(
        lambda: [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)], runs
    )
    naive_s = best_of(lambda: [tok(t, add_special_tokens=False) for t in texts], max(1, runs // 2))
    template_s = best_of(
        lambda: [tok.apply_chat_template(m, tools=t, tokenize=True) for m, t in data],
        max(1, runs // 2),
    )
    rate = tokens / compile_s
    raw = payload_tokens / raw_s
    print(f"  tokens: {tokens:,} ({payload_tokens:,} of payload text in {len(texts):,} pieces)")
    print(f"  compiler (compile_batch, checked)    {rate / 1e6:6.2f} M tok/s")
    print(f"  raw encode_batch of the same texts   {raw / 1e6:6.2f} M tok/s (ids as lists)")
    print(f"  naive: one tokenizer call a fragment {tokens / naive_s / 1e6:6.2f} M tok/s")
    print(f"  apply_chat_template + encode         {tokens / template_s / 1e6:6.2f} M tok/s")
    ratio = rate / raw
    print(f"  {verdict(ratio >= 0.9)}  compiler >= 90 % of raw encode_batch: {ratio:.0%}")


def parser_report(n: int, runs: int) -> None:
    """The parser fed one id at a time (its decoder from `decoder_for`) against
    `DecodeStream.step` on the same ids (the target), on a ByteLevel vocabulary (a byte table)
    and on a Llama-2-style one (a piece table); beside them, the table's decoder stepped alone
    (the parser's inline path reads the same table without that call) and the parser through
    `HFDecoder` (the `DecodeStream` path of every other vocabulary: WordPiece, …)."""
    from smllm.smi.convert import from_messages

    heading(f"parser: the same ids one at a time, best of {runs}")
    conversations_in = [from_messages(m, t) for m, t in conversations(n)]
    worst = max(
        parser_figures(name, *make(), conversations_in, runs)
        for name, make in (("ByteLevel", train_tokenizer), ("Llama-2 style", train_llama_tokenizer))
    )
    print(f"  {verdict(worst <= 0.05)}  parser overhead <= 5 %, both vocabularies: {worst:+.1%}")


def parser_figures(name: str, tok: Any, ids: Any, conversations_in: Any, runs: int) -> float:
    """One vocabulary's figures; the parser's overhead over `DecodeStream`."""
    from tokenizers.decoders import DecodeStream

    from smllm.smi.compile import Compiler
    from smllm.smi.parser import Decoder, StreamParser
    from smllm.smi.vocab.decode import HFDecoder, decoder_for, piece_backend
    from smllm.smi.vocab.encode import PlainEncoder

    compiler = Compiler(PlainEncoder.from_tokenizer(tok, ids), ids)
    streams = [c.ids for c in compiler.compile_batch(conversations_in)]
    backend = piece_backend(tok.backend_tokenizer)
    total = sum(len(s) for s in streams)

    def plain() -> None:
        for stream in streams:
            decode = DecodeStream(skip_special_tokens=False)
            for token_id in stream:
                decode.step(backend, token_id)

    def table() -> None:
        for stream in streams:
            step = decoder_for(tok).step
            for token_id in stream:
                step(token_id)

    def parsed(make: Callable[[Any], Decoder]) -> Callable[[], None]:
        def run() -> None:
            for stream in streams:
                parser = StreamParser(ids, make(tok), side="any")
                for token_id in stream:
                    parser.feed(token_id)
                parser.finish()

        return run

    plain_s = best_of(plain, runs)
    parse_s = best_of(parsed(decoder_for), runs)
    table_s = best_of(table, runs)
    stream_s = best_of(parsed(HFDecoder), runs)
    kind = type(decoder_for(tok)).__name__
    print(f"  {name}: {total:,} ids")
    print(f"    plain incremental decode (DecodeStream) {total / plain_s / 1e3:8.0f} k tok/s")
    print(f"    StreamParser (events, checks)           {total / parse_s / 1e3:8.0f} k tok/s")
    print(f"    {kind + '.step alone':<39} {total / table_s / 1e3:8.0f} k tok/s")
    print(f"    StreamParser through HFDecoder          {total / stream_s / 1e3:8.0f} k tok/s")
    print(f"    through HFDecoder: {stream_s / plain_s - 1:+.1%} over DecodeStream (informational)")
    overhead = parse_s / plain_s - 1
    print(f"    parser overhead: {overhead:+.1%}")
    return overhead


def tiny_mamba(vocab: int) -> Any:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.Mamba2Config(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=2,
        state_size=8,
        num_heads=4,
        head_dim=16,
        n_groups=1,
        expand=2,
        chunk_size=16,
    )
    return transformers.Mamba2ForCausalLM(config).eval()


def runtime_report(turns: int, new_tokens: int, runs: int) -> None:
    """A turn's generation (budget processor + parser + the runtime's loop) against a plain
    forward loop and `generate` on the same tiny Mamba2; then tokens fed per turn."""
    import asyncio

    import torch

    from smllm.smi.assemble import hf_runtime
    from smllm.smi.stream import Block, Transmission

    # one thread: a tiny model's ops are too small to split, and a second thread contending
    # with any other process made a step 30x slower here
    torch.set_num_threads(1)
    heading(f"runtime: tiny Mamba2 (hidden 32, 2 layers), up to {new_tokens} ids, best of {runs}")
    tok, _ = train_tokenizer(2000)
    model = tiny_mamba(len(tok))
    ask = Transmission.of(
        [
            Block.of("ctrl", {"reasoning": {"mode": "fixed", "max_tokens": new_tokens // 2}}),
            Block.of("usr", "Fix the failing test in the parser, then run the tests."),
        ]
    )
    runtime = hf_runtime(model, tok, max_new_tokens=new_tokens, generate_in_thread=False)
    prompt = runtime.compile(ask, False)

    def turn() -> int:
        return len(asyncio.run(runtime.session().turn(ask)).generated)

    # the other two make as many ids as the turn did (a random model ends its turn early,
    # and the prompt's feed must be spread over the same number of ids in all three)
    new_tokens = turn()

    def plain_loop() -> int:
        from smllm.smi.backends.hf import HFBackend

        backend = HFBackend(model)
        state = backend.new_state()
        logits = backend.feed(state, prompt)
        for _ in range(new_tokens):
            logits = backend.feed(state, [int(logits.argmax())])
        return new_tokens

    def generate() -> int:
        with torch.no_grad():
            out = model.generate(
                torch.tensor([prompt]),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
            )
        return int(out.shape[1]) - len(prompt)

    rates = {}
    for name, fn in (
        ("runtime turn", turn),
        ("plain forward loop", plain_loop),
        ("generate", generate),
    ):
        best = float("inf")
        count = 0
        for _ in range(runs):
            started = time.perf_counter()
            count = fn()
            best = min(best, (time.perf_counter() - started) / max(count, 1))
        rates[name] = 1 / best
        print(f"  {name:<20} {rates[name]:8.0f} tok/s  ({count} ids)")
    slower = 1 - rates["runtime turn"] / rates["generate"]
    print(f"  {verdict(slower <= 0.10)}  runtime <= 10 % below generate: {slower:+.1%}")
    # not the target (that is `generate`): a loop with no budget, sampler or parser,
    # the floor. The runtime adds about 30 us a token here (mask and pick 33 us against an
    # argmax of 6 us; parser and budget count 3 us), under 2 % of a step: the rest is noise
    slower = 1 - rates["runtime turn"] / rates["plain forward loop"]
    print(f"  runtime below the plain forward loop: {slower:+.1%} (informational)")

    heading(f"tokens fed per turn over {turns} turns (incremental vs re-encoding the history)")
    # re-encoding turn n from a fresh state feeds every id of turns 1..n: the incremental feeds
    # add up to the compiled conversation (tests/smi/test_runtime.py checks that), so its cost
    # is their running sum
    small = hf_runtime(model, tok, max_new_tokens=12, generate_in_thread=False)
    session = small.session()
    fed: list[int] = []
    for n in range(turns):
        message = Transmission.of([Block.of("usr", f"Step {n}: check the next file.")])
        fed.append(asyncio.run(session.turn(message)).fed_tokens)
    whole = sum(fed)
    print(f"  turn 1: {fed[0]} ids fed; turn {turns}: {fed[-1]} incremental, {whole} re-encoding")
    ratio = whole / fed[-1]
    print(f"  {verdict(ratio >= 10)}  >= 10x fewer at turn {turns}: {ratio:.0f}x")
    spread = max(fed[1:]) - min(fed[1:])
    print(f"  incremental per turn after the first: {min(fed[1:])}-{max(fed[1:])} (flat: {spread})")


def fuzz_report(n: int) -> None:
    from smllm.smi.compile import Compiler
    from smllm.smi.stream import Block, Transmission
    from smllm.smi.tokens import TOKEN_TEXT, Kind, slot_text
    from smllm.smi.vocab.encode import PlainEncoder

    heading(f"injection fuzz: {n:,} hostile payloads through the compiler")
    tok, ids = train_tokenizer()
    compiler = Compiler(PlainEncoder.from_tokenizer(tok, ids), ids)
    forbidden = compiler.encoder.forbidden
    markers = [*TOKEN_TEXT, *(slot_text(s) for s in range(10, 32)), "<tool_call>"]
    pieces = [*markers, "<|", "|>", "<", "|", ">", "\u200b", "\u00a0", "\uff5c", "\n", " "]
    rng = random.Random(5)
    started = time.perf_counter()
    leaks = 0
    for _ in range(n):
        payload = "".join(rng.choice(pieces + WORDS) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.1:
            payload += os.urandom(rng.randint(1, 16)).decode("utf-8", "replace")
        kind = rng.choice(["sys", "usr", "obs", "out"])
        compiled = compiler.compile([Transmission.of([Block.of(kind, payload)])])
        structure = [i for i in compiled.ids if i in forbidden]
        leaks += structure != [ids[Kind.from_tag(kind)], ids[Kind.EOT]]
    took = time.perf_counter() - started
    print(f"  {verdict(leaks == 0)}  payloads that yielded a forbidden id: {leaks} ({took:.1f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for CI")
    parser.add_argument("--fuzz", type=int, help="hostile payloads (default 100,000; quick 5,000)")
    parser.add_argument(
        "--constrain", action="store_true", help="only constrained decoding (smi_constrain_bench)"
    )
    args = parser.parse_args()
    import smi_constrain_bench

    if args.constrain:
        smi_constrain_bench.main(args.quick)
        return 0
    n, runs = (500, 2) if args.quick else (2000, 5)
    compile_report(n, runs)
    parser_report(200 if args.quick else 500, runs)
    runtime_report(50, 64 if args.quick else 256, runs)
    fuzz_report(args.fuzz or (5000 if args.quick else 100_000))
    smi_constrain_bench.main(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
