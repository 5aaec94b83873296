"""`smllm smi compile|parse|audit`: the State Model Interface for people who train and serve
models. The CLI's side only (reading lines, reporting, writing); the work is smllm.smi's.

Input is JSON lines; a line that can't be used is `error: FILE:LINE: …` on stderr and exit 1.
`compile` writes all of its output or none of it; `parse` prints what it could read.

`parse`'s text form escapes payloads so that only structure reads `<|`: in a payload, `<`
followed by backslashes and `|` gets one more backslash (`<|eot|>` → `<\\|eot|>`, `<\\|` →
`<\\\\|`). Taking one backslash out of each such run gives the payload back (`unescape_payload`);
`--json` gives payloads as they are.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from .common import Exit, emit_json, write_atomically

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace

    from ..smi.stream import Transmission
    from ..smi.vocab.load import Vocabulary

__all__ = ["escape_payload", "smi", "unescape_payload"]

#: errors listed before "… and N more"
_SHOWN = 20
#: conversations compiled per batch (the encoder's batch path)
_BATCH = 512


def smi(args: Namespace) -> int:
    actions = {"compile": _compile, "parse": _parse, "audit": _audit, "install": _install}
    action = actions[args.action]
    return action(args)


def _need_extra() -> None:
    import importlib.util

    missing = [m for m in ("tokenizers", "transformers", "rwkv") if not importlib.util.find_spec(m)]
    if missing:
        names = ", ".join(missing)
        raise Exit(2, f"smllm smi needs the smi extra ({names} missing): pip install 'smllm[smi]'")


def _load(args: Namespace) -> Vocabulary:
    _need_extra()
    from ..smi.vocab.load import load_vocabulary

    try:
        vocabulary = load_vocabulary(
            args.tokenizer,
            install=getattr(args, "install", False),
            base=getattr(args, "base", None),
        )
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
    # ((file, line), message): the batch's are found at its end, and reported in input order
    errors: list[tuple[tuple[int, int], str]] = []
    batch: list[tuple[tuple[int, int], str, list[Transmission]]] = []
    out: list[Compiled] = []

    def flush() -> None:
        try:
            out.extend(compiler.compile_batch([c for _, _, c in batch]))
        except ValueError:  # one of them (a stream rule, an encoding): find it, by line
            for at, where, conversation in batch:
                try:
                    out.append(compiler.compile(conversation))
                except ValueError as exc:
                    errors.append((at, f"{where}: {exc}"))
        batch.clear()

    for index, path in enumerate(args.input or ["-"]):  # several files: a run's transcripts
        for name, n, text in _lines(path):
            where = f"{name}:{n}"
            try:
                if text is None:
                    raise ValueError("not UTF-8 text")
                conversation = _conversation(_json_line(text))
            except (ValueError, RecursionError) as exc:
                errors.append(((index, n), f"{where}: {exc}"))
                continue
            batch.append(((index, n), where, conversation))
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


#: `<`, backslashes, `|`: what the text form escapes (one more backslash), and unescapes
_MARKER_START = re.compile(r"<(\\*)\|")
_ESCAPED_START = re.compile(r"<\\(\\*)\|")


def escape_payload(text: str) -> str:
    """A payload for `parse`'s text form: no `<|` left, so it can't look like structure."""
    return _MARKER_START.sub(r"<\\\1|", text) if "<" in text else text


def unescape_payload(text: str) -> str:
    """The payload `escape_payload` was given."""
    return _ESCAPED_START.sub(r"<\1|", text)


class _Ranges:
    """The ids of one modality: inclusive (first, last) ranges."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def __contains__(self, token_id: object) -> bool:
        if not isinstance(token_id, int):
            return False
        return any(first <= token_id <= last for first, last in self.ranges)


_MODALITY = re.compile(r"([A-Za-z0-9_.-]+)=([0-9]+)(?:-([0-9]+))?")


def _modalities(specs: Sequence[str]) -> dict[str, _Ranges]:
    """`--modality NAME=FIRST-LAST` (or `NAME=ID`), repeatable; Exit 2 for a malformed spec, an
    empty range, or ranges that overlap."""
    out: dict[str, _Ranges] = {}
    seen: list[tuple[int, int, str]] = []
    for spec in specs:
        match = _MODALITY.fullmatch(spec.strip())
        if match is None:
            raise Exit(
                2,
                f"--modality {spec}: expected NAME=FIRST-LAST, the ids FIRST to LAST (both "
                "included) of modality NAME, e.g. image=60000-60999",
            )
        name, first, last = match[1], int(match[2]), int(match[3] or match[2])
        if first > last:
            raise Exit(2, f"--modality {spec}: an empty range ({first} > {last}); write FIRST-LAST")
        for other_first, other_last, other in seen:
            if first <= other_last and other_first <= last:
                raise Exit(
                    2,
                    f"--modality {spec}: overlaps {other} (id {max(first, other_first)} is in "
                    "both); an id belongs to one modality",
                )
        seen.append((first, last, spec))
        out.setdefault(name, _Ranges()).ranges.append((first, last))
    return out


def _check_modalities(modalities: dict[str, _Ranges], smi_ids: Sequence[int]) -> None:
    for name, ranges in modalities.items():
        for first, last in ranges.ranges:
            inside = [i for i in smi_ids if first <= i <= last]
            if inside:
                raise Exit(
                    2,
                    f"--modality {name}={first}-{last}: covers SMI ids ({inside[0]}-{inside[-1]}"
                    f" of the block {smi_ids[0]}-{smi_ids[-1]}); a modality's ids are payload, "
                    "never structure",
                )


def _text_form(transmissions: Sequence[Transmission]) -> str:
    """The text form with every payload escaped (`escape_payload`); ValueError for token
    runs (they have none)."""
    from ..smi import stream
    from ..smi.render import render_text

    def escaped(block: stream.Block) -> stream.Block:
        parts = tuple(escape_payload(p) if isinstance(p, str) else p for p in block.parts)
        return stream.Block(block.kind, parts)

    return render_text([stream.Transmission(tuple(map(escaped, t.blocks))) for t in transmissions])


def _parse(args: Namespace) -> int:
    from ..smi.convert import to_native
    from ..smi.parser import EndOfTransmission, StreamParser, Violation

    modalities = _modalities(args.modality or ())
    vocabulary = _load(args)
    _check_modalities(modalities, vocabulary.ids.ids)
    errors: list[str] = []
    streams: list[dict[str, Any]] = []
    for name, n, text in _lines(args.input):
        where = f"{name}:{n}"
        try:
            if text is None:
                raise ValueError("not UTF-8 text")
            ids = _ids(text)
            parser = StreamParser(
                vocabulary.ids,
                vocabulary.decoder(),
                strict=not args.lenient,
                side=args.side,
                modalities=modalities,
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
                sys.stdout.write(("\n" if len(streams) > 1 else "") + _text_form(transmissions))
            except ValueError:  # token runs: no text form, so the native form
                sys.stdout.write(json.dumps(to_native(transmissions), ensure_ascii=False) + "\n")
    if args.json:
        emit_json({"streams": streams, "errors": errors})
    _report(errors)
    return 1 if errors else 0


# -- audit -------------------------------------------------------------------------------------


def _audit(args: Namespace) -> int:
    """Audit a vocabulary as it is (no SMI tokens needed): 0 when nothing is wrong, 1 when the
    plain encoder leaks or an added token is unsafe, 2 when it can't be read."""
    _need_extra()
    from ..smi.vocab.audit import audit, audit_trie
    from ..smi.vocab.load import RWKV_WORLD, check_base, load_tokenizer
    from ..smi.vocab.trie import TrieEncoder

    try:
        check_base(args.tokenizer, args.base)
        if args.tokenizer == RWKV_WORLD:
            report = audit_trie(TrieEncoder(base=args.base))
        else:
            report = audit(load_tokenizer(args.tokenizer))
    except (ValueError, OSError) as exc:
        raise Exit(2, str(exc)) from None
    if args.json:
        emit_json(report.to_dict())
    else:
        sys.stdout.write(_audit_text(args.tokenizer, report))
    return 0 if report.safe else 1


#: what a literal ▁ in a payload becomes, for people
_U2581 = {
    "bytes": "encoded as its bytes <0xE2><0x96><0x81>, it round-trips",
    "space": "the vocabulary reads it as a space and has no byte fallback to spell it: it "
    "comes back as a space",
}


def _id_range(ids: Any) -> str:
    first, last = ids[0], ids[-1]
    return f"{first}-{last}" if list(ids) == list(range(first, last + 1)) else str(list(ids))


def _audit_text(name: str, report: Any) -> str:
    """The report for people: the SMI block (or what installing would add), each added token's
    role and why (texts shown with repr, so whitespace and control characters are visible), per
    naive path the added tokens a payload reaches through it, then the compiler's path, which
    must reach none."""
    smi = report.smi_ids
    added = f"{len(report.added)} added tokens" if report.paths else "a trie, no added tokens"
    lines = [
        f"{name}: {report.vocab_size} ids, {added}, SMI tokens "
        + (f"at {_id_range(smi)}" if smi else "not installed"),
    ]
    if report.would_install is not None:
        would = list(report.would_install)
        lines.append(
            f"  install would add {len(would)} special tokens at "
            f"{_id_range([i for _, i in would])}:"
        )
        named = [f"{i} {text}" for text, i in would[:12]]
        lines.extend("    " + ", ".join(named[n : n + 6]) for n in range(0, len(named), 6))
        reserved = would[12:]
        if reserved:
            lines.append(
                f"    {_id_range([i for _, i in reserved])} {reserved[0][0]} … {reserved[-1][0]}"
            )
    elif report.install_refusal is not None:
        lines.append(f"  install would refuse: {report.install_refusal}")
    rows = [t for t in report.added if not t.smi]
    if report.added:
        markup = sum(t.role == "markup" for t in report.added)
        lines.append(
            f"  added tokens: {markup} markup (forbidden to payloads), "
            f"{len(report.added) - markup} content (payload text)"
        )
    if smi and len(rows) < len(report.added):
        lines.append(f"    {_id_range(smi)} the SMI tokens: markup (an SMI token)")
    for t in rows:
        flag = f" UNSAFE: {t.unsafe}" if t.unsafe else ""
        lines.append(f"    {t.id} {t.text!r}: {t.role} ({t.reason}){flag}")
    for path in report.paths:
        reached = [t for t in report.leaking(path) if t.role == "markup"]
        shown = ", ".join(repr(t.text) for t in reached[:6])
        more = f" and {len(reached) - 6} more" if len(reached) > 6 else ""
        lines.append(
            f"  {path}: a payload reaches {len(reached)} markup"
            + (f": {shown}{more}" if reached else "")
        )
    if report.literal_u2581 is not None:
        lines.append(f"  a literal ▁ in a payload: {_U2581[report.literal_u2581]}")
    if report.plain_encoder_leaks:
        lines.append(
            f"  the compiler's plain encoder: LEAKS {', '.join(report.plain_encoder_leaks)}"
        )
    else:
        lines.append("  the compiler's plain encoder: reaches none (every markup text tried)")
    return "".join(line + "\n" for line in lines)


# -- install -----------------------------------------------------------------------------------


def _install(args: Namespace) -> int:
    """`smllm smi install MODEL -o OUT`: the model folder with the SMI tokens, saved anew (a
    new folder: the weights being read are never written over)."""
    import os

    _need_extra()
    if not os.path.isdir(args.model):
        raise Exit(2, f"{args.model}: not a folder (a local Hugging Face model folder)")
    if os.path.exists(args.output) and (not os.path.isdir(args.output) or os.listdir(args.output)):
        raise Exit(2, f"{args.output}: exists and is not an empty folder; name a new one")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    from ..smi.backends.hf import quiet_transformers
    from ..smi.vocab.install import install_tokens

    quiet_transformers()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.model, local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
        before = len(tokenizer)
        ids = install_tokens(tokenizer, model)
    except (OSError, ValueError) as exc:
        raise Exit(2, f"{args.model}: {exc}") from None
    try:
        tokenizer.save_pretrained(args.output)
        model.save_pretrained(args.output)
    except OSError as exc:
        raise Exit(2, f"{args.output}: {exc.strerror or exc}") from None
    added = len(tokenizer) - before
    first, last = ids.ids[0], ids.ids[-1]
    if args.json:
        emit_json({"output": args.output, "smi_ids": [first, last], "added": added})
    else:
        sys.stdout.write(
            f"wrote {args.output}: SMI ids {first}-{last}"
            + (f" ({added} tokens added)\n" if added else " (already installed)\n")
        )
    return 0
