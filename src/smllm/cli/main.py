"""`smllm`: the command line (cli-and-harnesses.md §1, §2).

Exit codes: 0 done; 1 the command ran and reports a problem (a refused event, a call error, a
lookup that found nothing); 2 the command couldn't run (usage, a missing explicit config, no
config where one is needed, a store that can't be opened, an internal error). Errors go to
stderr as `error: …`; `--json` prints exactly one object on stdout.
"""

from __future__ import annotations

import gc
import os
import sys

from .common import Exit, fail, json_state, utf8

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["COMMANDS", "main"]


class _Namespace:
    """The hot commands' arguments as attributes, as argparse's Namespace holds them (the
    `types` module, for its SimpleNamespace, would be one import more on every hook)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def _fast_args(argv: list[str]) -> Any:
    """The hot commands without argparse, which costs a few milliseconds to import and build:
    `session show KEY [--json]` (hooks, status lines) and `fire [--session KEY] EVENT
    [--param NAME=VALUE]… [--host] [--json]` (agents in a shell). Anything else, or anything
    argparse might read differently (a value starting with `-`, `--opt=value`, abbreviations),
    takes the parser. The namespaces are the parser's own (tests/test_cli.py compares them)."""
    simple = len(argv) == 3 or (len(argv) == 4 and argv[3] == "--json")
    if simple and argv[:2] == ["session", "show"] and argv[2][:1] != "-":
        return _Namespace(
            command="session",
            action="show",
            key=argv[2],
            audit=False,
            json=len(argv) == 4,
            config=None,
        )
    if argv[:1] == ["statusline"]:
        return _fast_statusline(argv[1:])
    if argv[:1] == ["__complete"]:  # a completion script's helper, at each TAB: never refused
        kind = argv[1] if len(argv) > 1 else ""
        return _Namespace(command="__complete", kind=kind, words=argv[2:], config=None)
    if len(argv) == 4 and argv[:2] == ["harness", "hook"] and "-" not in argv[2][:1] + argv[3][:1]:
        return _Namespace(command="harness", action="hook", name=argv[2], hook=argv[3], config=None)
    if argv[:1] != ["fire"]:
        return None
    args: Any = _Namespace(
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


def _fast_statusline(words: list[str]) -> Any:
    """`statusline [--session KEY] [--json] [--color WHEN]`, each at most once, or None."""
    args: Any = _Namespace(
        command="statusline", session=None, json=False, color="auto", config=None
    )
    seen: set[str] = set()
    rest = iter(words)
    for word in rest:
        if word in seen:
            return None
        seen.add(word)
        if word == "--json":
            args.json = True
        elif word in ("--session", "--color"):
            value = next(rest, None)
            if value is None or value[:1] == "-":
                return None
            if word == "--color" and value not in ("auto", "always", "never"):
                return None
            setattr(args, word[2:], value)
        else:
            return None
    return args


#: command → (module of smllm.cli, function): only the command's own module is imported
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("commands", "init"),
    "new": ("commands", "new"),
    "fire": ("commands", "fire"),
    "session": ("commands", "session"),
    "instance": ("commands", "instance"),
    "store": ("store", "store"),
    "demo": ("commands", "demo"),
    "info": ("commands", "info"),
    "validate": ("validate", "validate"),
    "graph": ("graph", "graph"),
    "run": ("run", "run"),
    "completions": ("completions", "completions"),
    "__complete": ("completions", "complete"),
    "compile": ("compile", "compile_machine"),
    "statusline": ("statusline", "statusline"),
    "harness": ("harness", "harness"),
    "mcp": ("mcp", "mcp"),
    "smi": ("smi", "smi"),
}


def _dispatch(args: Namespace) -> int:
    module, name = COMMANDS[args.command]
    # __import__, not importlib.import_module: importlib's package imports `warnings`, a
    # millisecond on every hook call for nothing
    path = f"smllm.cli.{module}"
    __import__(path)
    run: Callable[[Namespace], int] = getattr(sys.modules[path], name)
    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it)."""
    # a command is short-lived and makes no reference cycles worth collecting: the cyclic
    # collector would run ~7 times during a hook call's imports (~1.3 ms of ~45 ms); an
    # in-process caller gets it back as it was
    collecting = gc.isenabled()
    gc.disable()
    try:
        code = _run(argv)
    finally:
        if collecting:
            gc.enable()
    if _quick_exit["now"]:
        _exit_now(code)
    return code


#: set by `_run` for the commands a client runs on every stop, prompt and status refresh,
#: and the completion scripts' helper (each TAB)
_quick_exit = {"now": False}
_QUICK = frozenset(
    {("harness", "hook"), ("statusline", None), ("session", "show"), ("__complete", None)}
)


def _exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: unloading ~100 modules and
    finalizing their objects costs ~4 ms of a ~40 ms hook call, and a hook has nothing left to
    do (its store connections are closed, its answer written). Only a real process of a hot
    command gets here (`main()` without argv): an in-process caller always gets the code back."""
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib would cost an import on the hook path
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe, a closed or no stream
            pass
    os._exit(code)


def _run(argv: Sequence[str] | None) -> int:
    json_state.update(wanted=False, emitted=False)
    _quick_exit["now"] = False
    if sys.stdout is None:  # started with stdout closed (`>&-`): do the work, print nowhere
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        for word in words:
            # a completion script's helper takes the line as typed: it prints nothing for
            # what it can't read, and never says why
            if not utf8(word) and words[:1] != ["__complete"]:
                raise Exit(2, f"argument {word!a} is not UTF-8 text")
        args = _fast_args(words)
        if args is None:
            from .parser import parse

            args = parse(argv)
        if args.command is None:  # bad usage: stdout stays empty (cli-and-harnesses.md §1)
            from .parser import build

            build().print_usage(sys.stderr)
            raise Exit(2, "no command given; smllm --help lists the commands")
        json_state["wanted"] = bool(getattr(args, "json", False))
        if (args.command, getattr(args, "action", None)) in _QUICK and argv is None:
            # a real process of a hot command: it ends through os._exit (_exit_now), and its
            # SQLite connections with it, unclosed (keep_open_until_exit says why)
            from ..store.sqlite import keep_open_until_exit

            keep_open_until_exit()
            _quick_exit["now"] = True
        code = _dispatch(args)
        if code == 1:
            code = fail(1, None)
        sys.stdout.flush()
        return code
    except Exit as exc:
        return fail(exc.code, exc.message)
    except BrokenPipeError:  # a closed stdout pipe ends the command quietly
        from ..errors import quiet_closed_stdout

        quiet_closed_stdout(sys.stdout)
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 2
    except Exception as exc:  # an internal error: exit 2, never a traceback
        from ..errors import SmllmError, debug_traceback, internal_error

        if isinstance(exc, SmllmError):
            return fail(exc.exit_code, str(exc))
        sys.stderr.write(f"error: {internal_error(exc)}\n")
        debug_traceback(sys.stderr, os.environ)
        return 2
