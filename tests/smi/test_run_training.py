"""`smllm run`'s transcripts as training data: the conversation file of each run compiles with
`smllm smi compile TOKENIZER FILE…` (several files, in order), labels on the model's blocks only,
and the ids the scripted model was fed and generated are exactly that conversation compiled in
its own vocabulary (what the model saw is what training sees)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import smllm
from helpers.scripts import act

from smllm.drive.bytevocab import BYTE_IDS, ByteEncoder
from smllm.smi.compile import IGNORE, Compiler
from smllm.smi.convert import from_native
from smllm.smi.vocab.encode import PlainEncoder

from .conftest import build_installed


def scripted_run(project: Path, env: dict[str, str], ref: str, *turns: Any) -> dict[str, Any]:
    script = project.parent / f"{ref}.json"
    script.write_text(json.dumps({"transmissions": list(turns)}))
    ran = smllm(
        ["run", "dev", "--ref", ref, "--backend", f"scripted:{script}", "--json"], project, env
    )
    assert ran.code == 0, ran.err
    summary: dict[str, Any] = json.loads(ran.out)
    return summary


def test_run_transcripts_compile_as_training_data(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    one = scripted_run(
        project,
        env,
        "GH-1",
        [{"type": "think", "text": "Plan first."}, act("a1", "planned", size="small")],
        [act("a2", "yield", note="waiting")],
    )
    two = scripted_run(
        project, env, "GH-2", [{"type": "out", "text": "Pausing."}, act("a1", "pause")]
    )
    files = [s["transcript"].replace(".turns.jsonl", ".smi.jsonl") for s in (one, two)]

    # the byte model's fed and generated ids are its conversation compiled, id for id
    for summary, file in zip((one, two), files, strict=True):
        (line,) = Path(file).read_text().splitlines()
        conversation = from_native(json.loads(line))
        compiled = Compiler(ByteEncoder(), BYTE_IDS).compile(conversation).ids
        turns = [json.loads(t) for t in Path(summary["transcript"]).read_text().splitlines()]
        seen = [i for t in turns for i in (*t["fed"], *t["generated"])]
        assert compiled[: len(seen)] == seen
        assert len(compiled) > len(seen)  # and the last OBS, which ended the run, unfed

    installed = build_installed("bytelevel")
    installed.tokenizer.backend_tokenizer.save(str(tmp_path / "tokenizer.json"))
    ran = smllm(["smi", "compile", str(tmp_path / "tokenizer.json"), *files], tmp_path, env)
    assert (ran.code, ran.err) == (0, "")
    rows = [json.loads(r) for r in ran.out.splitlines()]
    assert len(rows) == 2
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    for row, file in zip(rows, files, strict=True):
        conversation = from_native(json.loads(Path(file).read_text()))
        expected = Compiler(encoder, installed.ids).compile(conversation)
        assert row == {
            "input_ids": expected.ids,
            "labels": expected.labels,
            "assistant_mask": expected.assistant_mask,
        }
        # labels only where the model wrote: the model's blocks' text, decoded back
        targets = [
            i for i, label in zip(row["input_ids"], row["labels"], strict=True) if label != IGNORE
        ]
        said = installed.tokenizer.decode(targets, skip_special_tokens=False)
        model_text = [b.text for t in conversation if t.side == "model" for b in t.blocks]
        for text in model_text:
            assert text in said
        assert "Write a plan" not in said and "smllm guides" not in said

    # a broken line names its file and line, and nothing is written
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"transmissions": 3}\n')
    ran = smllm(
        ["smi", "compile", str(tmp_path / "tokenizer.json"), files[0], str(bad)], tmp_path, env
    )
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == f"error: {bad}:1: a conversation is a list of transmissions\n"
