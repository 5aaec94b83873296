"""`smllm`: the command line (cli-and-harnesses.md §1, §2).

Exit codes: 0 done; 1 the command ran and reports a problem (a refused event, a call error, a
lookup that found nothing); 2 the command couldn't run (usage, a missing explicit config, no
config where one is needed, a store that can't be opened, an internal error). Errors go to
stderr as `error: …`; `--json` prints exactly one object on stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["Exit", "config_option", "emit_json", "main", "make_folder", "utf8", "write_atomically"]


class Exit(Exception):
    """Leave with `code`, after `error: MESSAGE` on stderr when a message is given."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def config_option(args: Namespace) -> str | None:
    """`--config`, else a non-empty SMLLM_CONFIG; a missing explicit file is exit 2."""
    explicit = getattr(args, "config", None) or os.environ.get("SMLLM_CONFIG") or None
    if explicit and not os.path.isfile(explicit):
        raise Exit(2, f"config file {explicit} not found")
    return explicit


def write_atomically(path: str, data: bytes) -> None:
    """Write `path` whole or not at all (a temporary file, synced, then renamed); a path that
    can't be written is `error: can't write PATH: REASON`, exit 1."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        import contextlib

        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise Exit(1, f"can't write {path}: {exc.strerror}") from None


def make_folder(path: str) -> None:
    """`mkdir -p path`; one that can't be made is `error: can't create PATH: REASON`, exit 1."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise Exit(1, f"can't create {path}: {exc.strerror}") from None


def utf8(text: str) -> bool:
    """Whether `text` is text: bytes that aren't UTF-8 reach Python as lone surrogates (in
    arguments and, in some locales, standard input), and no store or reply can hold them."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: whether this command wants `--json`, and whether it printed its object (main() prints
#: `{"ok":false,"error":…}` for an exit 1 that printed none: exactly one object, always)
_json_state = {"wanted": False, "emitted": False}


def emit_json(obj: Any) -> None:
    from ..jsontext import dumps

    sys.stdout.write(dumps(obj) + "\n")
    _json_state["emitted"] = True


def _fail(code: int, message: str | None) -> int:
    """Leave with `code`: `error: MESSAGE` on stderr and, for a `--json` exit 1 that printed
    nothing yet, the one object cli-and-harnesses.md §1 promises (exit 2 prints nothing)."""
    if message:
        sys.stderr.write(f"error: {message}\n")
    if code == 1 and _json_state["wanted"] and not _json_state["emitted"]:
        emit_json({"ok": False, "error": message})
    return code


def _fast_args(argv: list[str]) -> Any:
    """The hot commands without argparse, which costs a few milliseconds to import and build:
    `session show KEY [--json]` (hooks, status lines) and `fire [--session KEY] EVENT
    [--param NAME=VALUE]… [--host] [--json]` (agents in a shell). Anything else, or anything
    argparse might read differently (a value starting with `-`, `--opt=value`, abbreviations),
    takes the parser. The namespaces are the parser's own (tests/test_cli.py compares them)."""
    from types import SimpleNamespace

    simple = len(argv) == 3 or (len(argv) == 4 and argv[3] == "--json")
    if simple and argv[:2] == ["session", "show"] and argv[2][:1] != "-":
        return SimpleNamespace(
            command="session",
            action="show",
            key=argv[2],
            audit=False,
            json=len(argv) == 4,
            config=None,
        )
    if argv[:1] != ["fire"]:
        return None
    args = SimpleNamespace(
        command="fire",
        event=None,
        session=None,
        host=False,
        param=[],
        params=None,
        json=False,
        config=None,
    )
    words = iter(argv[1:])
    for word in words:
        if word in ("--session", "--param"):
            value = next(words, None)
            if value is None or value[:1] == "-" or (word == "--session" and args.session):
                return None
            if word == "--session":
                args.session = value
            else:
                args.param.append(value)
        elif word in ("--json", "--host"):
            setattr(args, word[2:], True)
        elif word[:1] == "-" or args.event is not None:
            return None
        else:
            args.event = word
    return args if args.event is not None else None


#: command → (module of smllm.cli, function): only the command's own module is imported
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("commands", "init"),
    "new": ("commands", "new"),
    "fire": ("commands", "fire"),
    "session": ("commands", "session"),
    "instance": ("commands", "instance"),
    "demo": ("commands", "demo"),
    "info": ("commands", "info"),
    "validate": ("validate", "validate"),
    "graph": ("graph", "graph"),
    "completions": ("completions", "completions"),
    "compile": ("compile", "compile_machine"),
}


def _dispatch(args: Namespace) -> int:
    from importlib import import_module

    module, name = COMMANDS[args.command]
    run: Callable[[Namespace], int] = getattr(import_module(f"smllm.cli.{module}"), name)
    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it)."""
    _json_state.update(wanted=False, emitted=False)
    if sys.stdout is None:  # started with stdout closed (`>&-`): do the work, print nowhere
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        for word in words:
            if not utf8(word):
                raise Exit(2, f"argument {word!a} is not UTF-8 text")
        args = _fast_args(words)
        if args is None:
            from .parser import parse

            args = parse(argv)
        if args.command is None:
            from .parser import build

            build().print_help()
            return 2
        _json_state["wanted"] = bool(getattr(args, "json", False))
        code = _dispatch(args)
        if code == 1:
            code = _fail(1, None)
        sys.stdout.flush()
        return code
    except Exit as exc:
        return _fail(exc.code, exc.message)
    except BrokenPipeError:
        # a closed stdout pipe ends the command quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 2
    except Exception as exc:  # an internal error: exit 2, never a traceback
        from ..errors import SmllmError

        if isinstance(exc, SmllmError):
            return _fail(exc.exit_code, str(exc))
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {exc}\n")
        if os.environ.get("SMLLM_DEBUG"):
            import traceback

            traceback.print_exc()
        return 2
