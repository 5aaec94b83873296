"""`smllm smi compile|parse|audit`: the State Model Interface for people who train and serve
models. The CLI's side only (reading lines, reporting, writing); the work is smllm.smi's.

Input is JSON lines; a line that can't be used is `error: FILE:LINE: …` on stderr and exit 1.
`compile` writes all of its output or none of it; `parse` prints what it could read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from .common import Exit, emit_json, write_atomically

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace

    from ..smi.load import Vocabulary
    from ..smi.stream import Transmission

__all__ = ["smi"]

#: errors listed before "… and N more"
_SHOWN = 20
#: conversations compiled per batch (the encoder's batch path)
_BATCH = 512


def smi(args: Namespace) -> int:
    action = {"compile": _compile, "parse": _parse, "audit": _audit}[args.action]
    return action(args)


def _load(args: Namespace) -> Vocabulary:
    import importlib.util

    missing = [m for m in ("tokenizers", "transformers", "rwkv") if not importlib.util.find_spec(m)]
    if missing:
        names = ", ".join(missing)
        raise Exit(2, f"smllm smi needs the smi extra ({names} missing): pip install 'smllm[smi]'")
    from ..smi.load import load_vocabulary

    try:
        vocabulary = load_vocabulary(args.tokenizer, install=getattr(args, "install", False))
    except (ValueError, OSError) as exc:
        raise Exit(2, str(exc)) from None
    if vocabulary.installed:
        sys.stderr.write(
            f"warning: the SMI tokens were appended for this run at ids {vocabulary.ids.ids[0]}"
            f"-{vocabulary.ids.ids[-1]}; a model must be trained and served with the same ids\n"
        )
    return vocabulary


def _lines(path: str) -> Iterator[tuple[str, int, str | None]]:
    """(where, line number, text or None when not UTF-8) of each non-blank line."""
    name = "<stdin>" if path == "-" else path
    try:
        stream = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise Exit(2, f"can't read {path}: {exc.strerror}") from None
    with stream:
        for n, raw in enumerate(stream, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield name, n, None
                continue
            if text.strip():
                yield name, n, text


def _json_line(text: str) -> Any:
    def no_constant(name: str) -> Any:
        raise ValueError(f"not JSON: {name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from None


def _report(errors: list[str]) -> None:
    for line in errors[:_SHOWN]:
        sys.stderr.write(f"error: {line}\n")
    if len(errors) > _SHOWN:
        sys.stderr.write(f"error: … and {len(errors) - _SHOWN} more\n")


# -- compile -----------------------------------------------------------------------------------


def _conversation(value: Any) -> list[Transmission]:
    from ..smi.convert import from_messages, from_native

    if not isinstance(value, dict):
        raise ValueError("a line is a JSON object: messages (tools, ctrl) or transmissions")
    if "transmissions" in value:
        return from_native(value)
    unknown = sorted(set(value) - {"messages", "tools", "ctrl"})
    if unknown or "messages" not in value:
        what = f"unknown keys: {', '.join(unknown)}" if unknown else "no messages"
        raise ValueError(f"{what} (a line holds messages, tools and ctrl, or transmissions)")
    if not isinstance(value["messages"], list):
        raise ValueError("messages must be a list")
    tools, ctrl = value.get("tools"), value.get("ctrl")
    if tools is not None and not isinstance(tools, list):
        raise ValueError("tools must be a list")
    if ctrl is not None and not isinstance(ctrl, dict):
        raise ValueError("ctrl must be an object")
    return from_messages(value["messages"], tools, ctrl)


def _compile(args: Namespace) -> int:
    from ..smi.compile import Compiled, Compiler

    vocabulary = _load(args)
    compiler = Compiler(vocabulary.encoder, vocabulary.ids, strict=not args.lenient)
    errors: list[tuple[int, str]] = []  # (line, message): the batch's are found at its end
    batch: list[tuple[int, str, list[Transmission]]] = []
    out: list[Compiled] = []

    def flush() -> None:
        try:
            out.extend(compiler.compile_batch([c for _, _, c in batch]))
        except ValueError:  # one of them (a stream rule, an encoding): find it, by line
            for n, where, conversation in batch:
                try:
                    out.append(compiler.compile(conversation))
                except ValueError as exc:
                    errors.append((n, f"{where}: {exc}"))
        batch.clear()

    for name, n, text in _lines(args.input):
        where = f"{name}:{n}"
        try:
            if text is None:
                raise ValueError("not UTF-8 text")
            conversation = _conversation(_json_line(text))
        except (ValueError, RecursionError) as exc:
            errors.append((n, f"{where}: {exc}"))
            continue
        batch.append((n, where, conversation))
        if len(batch) >= _BATCH:
            flush()
    flush()
    if errors:
        _report([message for _, message in sorted(errors)])
        return 1
    lines = [
        json.dumps(
            {"input_ids": c.ids, "labels": c.labels, "assistant_mask": c.assistant_mask},
            separators=(",", ":"),
        )
        for c in out
    ]
    data = "".join(line + "\n" for line in lines)
    if args.output:
        write_atomically(args.output, data.encode("utf-8"))
        if args.json:
            emit_json(
                {
                    "conversations": len(out),
                    "tokens": sum(len(c) for c in out),
                    "targets": sum(sum(c.assistant_mask) for c in out),
                    "output": args.output,
                    "smi_ids": [vocabulary.ids.ids[0], vocabulary.ids.ids[-1]],
                }
            )
    else:
        sys.stdout.write(data)
    return 0


# -- parse -------------------------------------------------------------------------------------


def _ids(text: str) -> list[int]:
    stripped = text.strip()
    if stripped[:1] in "[{":
        value = _json_line(stripped)
        if isinstance(value, dict):
            value = value.get("input_ids")
    else:
        try:
            value = [int(word) for word in stripped.split()]
        except ValueError:
            raise ValueError("ids are a JSON array, an object with input_ids, or numbers") from None
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    ):
        raise ValueError("ids must be non-negative integers")
    return value


def _parse(args: Namespace) -> int:
    from ..smi.convert import to_native
    from ..smi.parser import EndOfTransmission, StreamParser, Violation
    from ..smi.render import render_text

    vocabulary = _load(args)
    errors: list[str] = []
    streams: list[dict[str, Any]] = []
    for name, n, text in _lines(args.input):
        where = f"{name}:{n}"
        try:
            if text is None:
                raise ValueError("not UTF-8 text")
            ids = _ids(text)
            parser = StreamParser(
                vocabulary.ids, vocabulary.decoder(), strict=not args.lenient, side=args.side
            )
            events = parser.feed(ids) + parser.finish()
        except (ValueError, RecursionError) as exc:
            errors.append(f"{where}: {exc}")
            continue
        transmissions = [e.transmission for e in events if isinstance(e, EndOfTransmission)]
        violations = [e.message for e in events if isinstance(e, Violation)]
        for message in violations:
            sys.stderr.write(f"warning: {where}: {message}\n")
        streams.append({"line": n, **to_native(transmissions), "violations": violations})
        if not args.json:
            try:
                sys.stdout.write(("\n" if len(streams) > 1 else "") + render_text(transmissions))
            except ValueError:  # token runs: no text form, so the native form
                sys.stdout.write(json.dumps(to_native(transmissions), ensure_ascii=False) + "\n")
    if args.json:
        emit_json({"streams": streams, "errors": errors})
    _report(errors)
    return 1 if errors else 0


# -- audit -------------------------------------------------------------------------------------


def _audit(args: Namespace) -> int:
    from ..smi.audit import audit

    vocabulary = _load(args)
    if vocabulary.tokenizer is None:  # the RWKV trie has no added vocabulary to leak
        raise Exit(2, f"{args.tokenizer}: no added tokens to audit (a trie vocabulary)")
    report = audit(vocabulary.tokenizer)
    if args.json:
        emit_json(report.to_dict())
    else:
        sys.stdout.write(_audit_text(args.tokenizer, report))
    return 0 if report.safe else 1


def _audit_text(name: str, report: Any) -> str:
    """The report for people: per naive path, the added tokens a payload reaches through it;
    then the compiler's path, which must reach none."""
    smi = report.smi_ids
    lines = [
        f"{name}: {report.vocab_size} ids, {len(report.added)} added tokens, SMI tokens "
        + (f"at {smi[0]}-{smi[-1]}" if smi else "not installed"),
    ]
    for path in report.paths:
        reached = report.leaking(path)
        shown = ", ".join(t.text for t in reached[:8])
        more = f" and {len(reached) - 8} more" if len(reached) > 8 else ""
        lines.append(
            f"  {path}: a payload reaches {len(reached)}" + (f": {shown}{more}" if reached else "")
        )
    if report.safe:
        lines.append("  the compiler's plain encoder: reaches none (every added text tried)")
    else:
        lines.append(
            f"  the compiler's plain encoder: LEAKS {', '.join(report.plain_encoder_leaks)}"
        )
    return "".join(line + "\n" for line in lines)
