"""`smllm`: the command line (cli-and-harnesses.md §1, §2).

Exit codes: 0 done; 1 the command ran and reports a problem (a refused event, a call error, a
lookup that found nothing); 2 the command couldn't run (usage, a missing explicit config, no
config where one is needed, a store that can't be opened, an internal error). Errors go to
stderr as `error: …`; `--json` prints exactly one object on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["Exit", "config_option", "emit_json", "main"]


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


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


def _fast_args(argv: list[str]) -> Any:
    """`session show KEY [--json]` without argparse: the hot read of hooks and status lines
    skips building the whole parser (and the modules argparse imports)."""
    simple = len(argv) == 3 or (len(argv) == 4 and argv[3] == "--json")
    if simple and argv[:2] == ["session", "show"] and argv[2][:1] != "-":
        from types import SimpleNamespace

        return SimpleNamespace(
            command="session",
            action="show",
            key=argv[2],
            audit=False,
            json=len(argv) == 4,
            config=None,
        )
    return None


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
    try:
        args = _fast_args(list(sys.argv[1:] if argv is None else argv))
        if args is None:
            from .parser import parse

            args = parse(argv)
        if args.command is None:
            from .parser import build

            build().print_help()
            return 2
        code = _dispatch(args)
        sys.stdout.flush()
        return code
    except Exit as exc:
        if exc.message:
            sys.stderr.write(f"error: {exc.message}\n")
        return exc.code
    except BrokenPipeError:
        # a closed stdout pipe ends the command quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 2
    except Exception as exc:  # an internal error: exit 2, never a traceback
        from ..store.base import StoreBusy, StoreError

        if isinstance(exc, StoreBusy):
            sys.stderr.write(f"error: {exc}\n")
            return 1
        if isinstance(exc, StoreError):
            sys.stderr.write(f"error: {exc}\n")
            return 2
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {exc}\n")
        if os.environ.get("SMLLM_DEBUG"):
            import traceback

            traceback.print_exc()
        return 2
