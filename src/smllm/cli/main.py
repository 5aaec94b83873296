"""`smllm`: the command line (cli-and-harnesses.md §1, §2).

Exit codes: 0 done; 1 the command ran and reports a problem (a refused event, a call error, a
lookup that found nothing); 2 the command couldn't run (usage, a missing explicit config, no
config where one is needed, a store that can't be opened, an internal error). Errors go to
stderr as `error: …`; `--json` prints exactly one object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = ["Exit", "main"]


class Exit(Exception):
    """Leave with `code`, after `error: MESSAGE` on stderr when a message is given."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Exit(2, message)


def _config_flag(p: argparse.ArgumentParser, top: bool) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None if top else argparse.SUPPRESS,
        help="read only this config file (also SMLLM_CONFIG)",
    )


def _parser() -> _Parser:
    from .. import __version__

    top = _Parser(prog="smllm", description="State machines that guide coding agents.")
    top.add_argument("-V", "--version", action="version", version=f"smllm {__version__}")
    _config_flag(top, True)
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        _config_flag(p, False)
        return p

    p = cmd("init", "write a config template to ./.smllm/config.toml")
    p.add_argument("--user", action="store_true", help="write the user config instead")
    p.add_argument("--json", action="store_true")

    p = cmd("new", "print a machine template, or write it with --write")
    p.add_argument("id")
    p.add_argument("--dir", default=None)
    p.add_argument("--write", action="store_true")
    p.add_argument("--json", action="store_true")

    p = cmd("fire", "fire one event")
    p.add_argument("event")
    p.add_argument("--session", metavar="KEY")
    p.add_argument("--host", action="store_true", help="fire as the host")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--params", metavar="JSON", help="params as one JSON object; - reads it "
                   "from standard input")
    p.add_argument("--json", action="store_true")

    p = cmd("session", "list, show or start sessions")
    ssub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    q = ssub.add_parser("list", help="sessions, most recently active first")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)
    q = ssub.add_parser("show", help="where a session is, as the agent sees it")
    q.add_argument("key")
    q.add_argument("--audit", action="store_true")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)
    q = ssub.add_parser("new", help="start a session in idle and show it")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)

    p = cmd("instance", "list or show instances")
    isub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    q = isub.add_parser("list", help="instances of the configured machines")
    q.add_argument("--machine")
    q.add_argument(
        "--status",
        action="append",
        default=[],
        choices=["active", "interrupted", "paused", "completed"],
    )
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)
    q = isub.add_parser("show", help="an instance and its history")
    q.add_argument("ref", metavar="ID|REF")
    q.add_argument("--machine")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)

    p = cmd("demo", "play a scripted agent through the example machine in a throw-away folder")
    p.add_argument("--keep", action="store_true", help="keep the folder and print its path")
    return top


def config_option(args: argparse.Namespace) -> str | None:
    """`--config`, else a non-empty SMLLM_CONFIG; a missing explicit file is exit 2."""
    explicit = getattr(args, "config", None) or os.environ.get("SMLLM_CONFIG") or None
    if explicit and not os.path.isfile(explicit):
        raise Exit(2, f"config file {explicit} not found")
    return explicit


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


def _dispatch(args: argparse.Namespace) -> int:
    from . import commands

    table: dict[str, Callable[[argparse.Namespace], int]] = {
        "init": commands.init,
        "new": commands.new,
        "fire": commands.fire,
        "session": commands.session,
        "instance": commands.instance,
        "demo": commands.demo,
    }
    return table[args.command](args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it)."""
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            _parser().print_help()
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


def entry() -> NoReturn:
    sys.exit(main())
