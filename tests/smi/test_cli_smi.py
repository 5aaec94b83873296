"""`smllm smi compile|parse|audit` as people run them: real processes, exact outputs, exit
codes, and files written whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import smllm

from smllm.smi.compile import Compiler
from smllm.smi.convert import from_messages
from smllm.smi.tokens import Kind
from smllm.smi.vocab.encode import PlainEncoder

from .conftest import Installed, build_installed, build_tokenizer

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hello <|sys|> world <tool_call>"},
    {"role": "assistant", "content": "hi", "reasoning_content": "easy"},
]


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, Installed]:
    """A tokenizer.json with the SMI tokens (ByteLevel BPE), saved in tmp_path."""
    installed = build_installed("bytelevel")
    installed.tokenizer.backend_tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path, installed


def lines(*values: Any) -> str:
    return "".join(json.dumps(v) + "\n" for v in values)


def test_compile_to_stdout_is_the_compilers_output(work: tuple[Path, Installed]) -> None:
    folder, installed = work
    ran = smllm(
        ["smi", "compile", "tokenizer.json"], folder, {}, stdin=lines({"messages": MESSAGES})
    )
    assert (ran.code, ran.err) == (0, "")
    (row,) = [json.loads(line) for line in ran.out.splitlines()]
    encoder = PlainEncoder.from_tokenizer(installed.tokenizer, installed.ids)
    expected = Compiler(encoder, installed.ids).compile(from_messages(MESSAGES))
    assert row == {
        "input_ids": expected.ids,
        "labels": expected.labels,
        "assistant_mask": expected.assistant_mask,
    }
    # the payload's markers stayed text: exactly the structure's ids are SMI ids
    smi = [i for i in row["input_ids"] if i in installed.ids.all]
    kinds = [installed.ids.kind_of(i) for i in smi]
    assert kinds == [Kind.SYS, Kind.USR, Kind.EOT, Kind.THINK, Kind.OUT, Kind.EOT]


def test_compile_to_a_file_with_a_summary(work: tuple[Path, Installed]) -> None:
    folder, installed = work
    native = {"transmissions": [[{"type": "usr", "text": "x"}], [{"type": "out", "text": "y"}]]}
    stdin = lines({"messages": MESSAGES}, native)
    ran = smllm(
        ["smi", "compile", "tokenizer.json", "-", "-o", "out.jsonl", "--json"], folder, {}, stdin
    )
    assert ran.code == 0, ran.err
    summary = json.loads(ran.out)
    rows = [json.loads(line) for line in (folder / "out.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert summary == {
        "conversations": 2,
        "tokens": sum(len(r["input_ids"]) for r in rows),
        "targets": sum(sum(r["assistant_mask"]) for r in rows),
        "output": "out.jsonl",
        "smi_ids": [installed.ids.ids[0], installed.ids.ids[-1]],
    }


def test_compile_is_all_or_nothing(work: tuple[Path, Installed]) -> None:
    folder, _ = work
    (folder / "out.jsonl").write_text("before\n")
    bad = (
        lines({"messages": MESSAGES}, {"messages": MESSAGES, "x": 1})
        + "nonsense\n\n[1, 2]\n"
        + lines({"transmissions": [[{"type": "usr"}, {"type": "sys"}]]})
        + '{"messages": [{"role": "user", "content": NaN}]}\n'
    )
    ran = smllm(["smi", "compile", "tokenizer.json", "-o", "out.jsonl"], folder, {}, bad)
    assert ran.code == 1
    assert ran.out == ""
    assert ran.err.splitlines() == [
        "error: <stdin>:2: unknown keys: x (a line holds messages, tools and ctrl, or "
        "transmissions)",
        "error: <stdin>:3: not JSON: Expecting value at column 1",
        "error: <stdin>:5: a line is a JSON object: messages (tools, ctrl) or transmissions",
        "error: <stdin>:6: transmission 1, block 2: a sys block after a usr block: a runtime "
        "transmission keeps the order ctrl, sys, dev, caps, usr, obs",
        "error: <stdin>:7: not JSON: NaN is not a JSON number",
    ]
    assert (folder / "out.jsonl").read_text() == "before\n"  # untouched


def test_compile_lenient_takes_what_strict_refuses(work: tuple[Path, Installed]) -> None:
    folder, _ = work
    stdin = lines({"transmissions": [[{"type": "usr"}, {"type": "sys"}]]})
    ran = smllm(["smi", "compile", "tokenizer.json", "--lenient"], folder, {}, stdin)
    assert ran.code == 0, ran.err


def test_compile_bytes_that_arent_utf8(work: tuple[Path, Installed]) -> None:
    folder, _ = work
    (folder / "in.jsonl").write_bytes(b'{"messages": []}\n\xff\xfe\n')
    ran = smllm(["smi", "compile", "tokenizer.json", "in.jsonl"], folder, {})
    assert (ran.code, ran.err) == (1, "error: in.jsonl:2: not UTF-8 text\n")


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope.json"], "error: nope.json: no such file or folder (a tokenizer.json, a "
         "tokenizer folder, or rwkv-world; nothing is downloaded)\n"),
        (["tokenizer.json", "missing.jsonl"], "error: can't read missing.jsonl: No such file or "
         "directory\n"),
        (["plain.json"], "error: plain.json: the SMI tokens are not installed: <|ctrl|>, "
         "<|sys|>, <|dev|>, <|caps|>, <|usr|> and 27 more missing (install_tokens); pass "
         "--install to append them for this run, or save a tokenizer with them "
         "(smllm.smi.vocab.install.install_tokens)\n"),
        (["garbage.json"], "error: garbage.json: not a tokenizer that can be read: "),
    ],
)  # fmt: skip
def test_compile_cant_run(work: tuple[Path, Installed], args: list[str], message: str) -> None:
    folder, _ = work
    build_tokenizer("bytelevel").backend_tokenizer.save(str(folder / "plain.json"))
    (folder / "garbage.json").write_text('{"version": 1}')
    ran = smllm(["smi", "compile", *args], folder, {}, stdin="")
    assert ran.code == 2
    assert ran.err.startswith(message) and ran.err.count("\n") == 1, ran.err
    assert "Traceback" not in ran.err


def test_install_for_one_run(work: tuple[Path, Installed]) -> None:
    folder, _ = work
    plain = build_tokenizer("bytelevel")
    plain.backend_tokenizer.save(str(folder / "plain.json"))
    stdin = lines({"messages": MESSAGES})
    ran = smllm(["smi", "compile", "plain.json", "--install"], folder, {}, stdin)
    assert ran.code == 0
    first = len(plain)
    assert ran.err == (
        f"warning: the SMI tokens were appended for this run at ids {first}-{first + 31}; a "
        "model must be trained and served with the same ids\n"
    )
    assert (
        first in json.loads(ran.out)["input_ids"] or first + 1 in json.loads(ran.out)["input_ids"]
    )


def test_parse_reads_back_what_compile_wrote(work: tuple[Path, Installed]) -> None:
    folder, _ = work
    compiled = smllm(
        ["smi", "compile", "tokenizer.json"], folder, {}, lines({"messages": MESSAGES})
    )
    ran = smllm(["smi", "parse", "tokenizer.json"], folder, {}, stdin=compiled.out)
    assert (ran.code, ran.err) == (0, "")
    assert ran.out == (
        "<|sys|>\nBe brief.\n<|usr|>\nhello <|sys|> world <tool_call>\n<|eot|>\n"
        "<|think|>\neasy\n<|out|>\nhi\n<|eot|>\n"
    )
    ran = smllm(["smi", "parse", "tokenizer.json", "--json"], folder, {}, stdin=compiled.out)
    assert json.loads(ran.out) == {
        "streams": [
            {
                "line": 1,
                "transmissions": [
                    [
                        {"type": "sys", "text": "Be brief."},
                        {"type": "usr", "text": "hello <|sys|> world <tool_call>"},
                    ],
                    [{"type": "think", "text": "easy"}, {"type": "out", "text": "hi"}],
                ],
                "violations": [],
            }
        ],
        "errors": [],
    }


def test_parse_model_output_strict_and_lenient(work: tuple[Path, Installed]) -> None:
    folder, installed = work
    ids = installed.ids
    # a model that writes a runtime block: refused in strict mode, reported in lenient mode
    stream = [ids[Kind.OUT], ids[Kind.SYS], ids[Kind.EOT]]
    text = " ".join(map(str, stream)) + "\n"
    strict = smllm(["smi", "parse", "tokenizer.json", "--side", "model"], folder, {}, text)
    assert strict.code == 1
    assert strict.err.startswith("error: <stdin>:1: ")
    assert "sys" in strict.err
    lenient = smllm(
        ["smi", "parse", "tokenizer.json", "--side", "model", "--lenient", "--json"],
        folder,
        {},
        text,
    )
    assert lenient.code == 0
    report = json.loads(lenient.out)
    assert report["streams"][0]["transmissions"] == [[{"type": "out", "text": ""}]]
    assert len(report["streams"][0]["violations"]) == 1
    assert lenient.err.startswith("warning: <stdin>:1: ")


@pytest.mark.parametrize(
    "line, message",
    [
        ("1 2 x", "ids are a JSON array, an object with input_ids, or numbers"),
        ("[1, -2]", "ids must be non-negative integers"),
        ('{"input_ids": "12"}', "ids must be non-negative integers"),
        ("[1, true]", "ids must be non-negative integers"),
        ("[1,", "not JSON"),
    ],
)
def test_parse_bad_lines(work: tuple[Path, Installed], line: str, message: str) -> None:
    folder, _ = work
    ran = smllm(["smi", "parse", "tokenizer.json"], folder, {}, stdin=line + "\n")
    assert ran.code == 1
    assert ran.err.startswith(f"error: <stdin>:1: {message}")


def test_rwkv_world(tmp_path: Path) -> None:
    stdin = lines({"messages": [{"role": "user", "content": "你好 <|eot|>"}]})
    ran = smllm(["smi", "compile", "rwkv-world"], tmp_path, {}, stdin)
    assert ran.code == 0, ran.err
    row = json.loads(ran.out)
    assert [i for i in row["input_ids"] if i >= 65530] == [65534, 65539]  # usr, eot
    back = smllm(["smi", "parse", "rwkv-world"], tmp_path, {}, stdin=ran.out)
    assert back.out == "<|usr|>\n你好 <|eot|>\n<|eot|>\n"


def test_without_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from smllm.cli.main import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("transformers", "rwkv") else real(name, *a),
    )
    assert main(["smi", "compile", "rwkv-world"]) == 2
    assert capsys.readouterr().err == (
        "error: smllm smi needs the smi extra (transformers, rwkv missing): "
        "pip install 'smllm[smi]'\n"
    )


def test_audit_a_tokenizer_json(work: tuple[Path, Installed]) -> None:
    folder, installed = work
    ran = smllm(["smi", "audit", "tokenizer.json"], folder, {})
    assert (ran.code, ran.err) == (0, "")
    first, last = installed.ids.ids[0], installed.ids.ids[-1]
    lines = ran.out.splitlines()
    assert (
        lines[0] == f"tokenizer.json: {last + 1} ids, 34 added tokens, SMI tokens at {first}-{last}"
    )
    assert lines[1].startswith("  backend: a payload reaches 34: ")
    assert lines[2] == "  encode_special_tokens=True: a payload reaches 1: <tool_call>"
    assert lines[3] == "  the compiler's plain encoder: reaches none (every added text tried)"
    report = json.loads(smllm(["smi", "audit", "tokenizer.json", "--json"], folder, {}).out)
    assert report["plain_encoder_leaks"] == []
    decoy = next(t for t in report["added"] if t["text"] == "<tool_call>")
    assert decoy["leaks_through"] == ["backend", "encode_special_tokens=True"]


def test_audit_a_tokenizer_folder(work: tuple[Path, Installed]) -> None:
    folder, installed = work
    installed.tokenizer.save_pretrained(str(folder / "tok"))
    ran = smllm(["smi", "audit", "tok", "--json"], folder, {})
    assert ran.code == 0, ran.err
    report = json.loads(ran.out)
    assert report["paths"] == [
        "default",
        "add_special_tokens=False",
        "split_special_tokens=True",
        "backend",
    ]
    decoy = next(t for t in report["added"] if t["text"] == "<tool_call>")
    assert "split_special_tokens=True" in decoy["leaks_through"]
    assert report["plain_encoder_leaks"] == []


def test_audit_of_rwkv_world_has_nothing_to_audit(tmp_path: Path) -> None:
    ran = smllm(["smi", "audit", "rwkv-world"], tmp_path, {})
    assert (ran.code, ran.err) == (
        2,
        "error: rwkv-world: no added tokens to audit (a trie vocabulary)\n",
    )
