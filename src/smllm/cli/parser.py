"""The argument parser of `smllm` (cli-and-harnesses.md §2). Imported only when a command
needs it: `session show` takes a direct route (see main._fast_args)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from ..machine.configs.config import HARNESS_PARTS
from .common import Exit

__all__ = ["build", "parse"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Exit(2, message)


def _base_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base",
        type=int,
        metavar="N",
        help="where the SMI block starts in rwkv-world (default 65530, the reference's ids)",
    )


def _config_flag(p: argparse.ArgumentParser, top: bool) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None if top else argparse.SUPPRESS,
        help="read only this config file (also SMLLM_CONFIG)",
    )


def build() -> _Parser:
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
    p.add_argument(
        "id", metavar="ID", help="the machine's id (a letter, then letters, digits, -, _)"
    )
    p.add_argument("--dir", default=None, help="with --write: the folder (default: the config's)")
    p.add_argument("--write", action="store_true", help="write the file and list it in the config")
    p.add_argument("--json", action="store_true")

    p = cmd("fire", "fire one event")
    p.add_argument("event", metavar="EVENT", help="the event; without --session, only enter")
    p.add_argument("--session", metavar="KEY", help="the session key from the latest header")
    p.add_argument("--host", action="store_true", help="fire as the host")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one param (repeatable); a JSON param's VALUE is JSON text",
    )
    p.add_argument(
        "--params", metavar="JSON", help="params as one JSON object; - reads it from standard input"
    )
    p.add_argument("--json", action="store_true")

    p = cmd("session", "list, show or start sessions")
    ssub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    q = ssub.add_parser("list", help="sessions, most recently active first")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)
    q = ssub.add_parser("show", help="where a session is, as the agent sees it")
    q.add_argument("key", metavar="KEY", help="the session key")
    q.add_argument("--audit", action="store_true", help="the session's audit, oldest first")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)
    q = ssub.add_parser("new", help="start a session in idle and show it")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)

    p = cmd("instance", "list or show instances")
    isub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    q = isub.add_parser("list", help="instances of the configured machines")
    q.add_argument("--machine", metavar="ID", help="only this machine's instances")
    q.add_argument(
        "--status",
        action="append",
        default=[],
        choices=["active", "interrupted", "paused", "completed"],
        help="only instances with this status (repeatable)",
    )
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)
    q = isub.add_parser("show", help="an instance and its history")
    q.add_argument("ref", metavar="ID|REF", help="an instance's id or ref")
    q.add_argument("--machine", metavar="ID", help="the machine, when the ref names several")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)

    p = cmd("store", "move a project's instances to another store")
    stsub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    q = stsub.add_parser(
        "migrate",
        help="copy the instances and history to TARGET, all or nothing, then point the config "
        "there",
        description="Copy every instance and history record of the config's store to TARGET "
        "in one transaction, then set the config's [state] to TARGET and delete the moved rows "
        "from the old store (unless --keep).",
    )
    q.add_argument(
        "target",
        metavar="TARGET",
        help="a postgresql:// URL, env:VAR (the URL in that variable), or a folder (SQLite)",
    )
    q.add_argument("--namespace", help="the PostgreSQL namespace (default: default)")
    q.add_argument("--keep", action="store_true", help="leave the moved rows in the old store")
    q.add_argument("--json", action="store_true")
    _config_flag(q, False)

    p = cmd("validate", "check configs and machine files; findings at file:line:col")
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a config (.toml) or a machine file; default: the configs found",
    )
    p.add_argument("--info", action="store_true", help="list info findings too")
    p.add_argument("--warnings", action="store_true", help="fail (exit 1) on warnings too")
    p.add_argument("--json", action="store_true")

    p = cmd("compile", "print a machine file's normal form: compact JSON, prompt files inlined")
    p.add_argument("file", metavar="FILE", help="a machine file")
    p.add_argument("-o", "--output", metavar="OUT", help="write OUT instead of standard output")

    p = cmd("graph", "the states and transitions of the configured machines")
    p.add_argument("id", nargs="?", help="one machine")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--mermaid", action="store_true", help="a Mermaid stateDiagram-v2")
    form.add_argument("--dot", action="store_true", help="Graphviz DOT")
    form.add_argument("--json", action="store_true")

    p = cmd("statusline", "one line for a status bar: where a session is (Claude's statusLine)")
    p.add_argument("--session", help="the session to show; default: Claude's, from stdin")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colours: auto (on unless NO_COLOR is set), always or never",
    )

    p = cmd("harness", "install smllm into an agent client, check it, or run its hooks")
    hsub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    parts = "; ".join(f"{name}: {', '.join(found)}" for name, found in HARNESS_PARTS.items())
    names = ", ".join(HARNESS_PARTS)
    for action, help_, more in (
        ("install", f"write smllm's parts into a client's files ({names})", f"Parts: {parts}."),
        ("status", "the state of each part, writing nothing", f"Parts: {parts}."),
        (
            "uninstall",
            "remove smllm's parts from a client's files, keeping everything else",
            "Removes smllm's own entries only (the user's hooks, servers, permissions and "
            "text stay); a part another installed client shares (the instructions region, "
            f".mcp.json's server) stays while that client is installed. Parts: {parts}.",
        ),
    ):
        q = hsub.add_parser(
            action, help=help_, description=f"{help_[0].upper()}{help_[1:]}. {more}"
        )
        q.add_argument(
            "name",
            metavar="NAME",
            nargs="?" if action == "status" else None,
            help=f"the client: {names}"
            + ("; default: every installed one" if action == "status" else ""),
        )
        q.add_argument(
            "--scope",
            choices=["project", "user"],
            default="project",
            help="this project (the folder holding .smllm/) or your user account",
        )
        if action == "install":
            q.add_argument(
                "--without",
                action="append",
                default=[],
                metavar="PART",
                help="decline a part (repeatable; recorded in the config)",
            )
            q.add_argument(
                "--with",
                dest="with_",
                action="append",
                default=[],
                metavar="PART",
                help="take a declined part back (repeatable)",
            )
            q.add_argument("--force", action="store_true", help="rewrite parts edited by hand")
        q.add_argument("--json", action="store_true")
        _config_flag(q, False)
    # run by the client, not by people: hidden from help
    q = hsub.add_parser("hook")
    q.add_argument("name", metavar="NAME", help="the client")
    q.add_argument("hook", metavar="HOOK", help="session-start, user-prompt-submit or stop")
    _config_flag(q, False)

    cmd("mcp", "the MCP server on stdio: one tool, smllm")

    p = cmd("run", "a model drives itself through a machine over SMI, headless")
    p.add_argument("machine", metavar="MACHINE", nargs="?", help="the machine to enter")
    p.add_argument("--ref", help="the instance's ref (an existing one continues it)")
    p.add_argument("--state", help="an entry point to enter instead of the initial state")
    p.add_argument("--session", metavar="KEY", help="continue this run's session")
    model = p.add_mutually_exclusive_group()
    model.add_argument("--model", metavar="PATH", help="a local Hugging Face model folder")
    model.add_argument(
        "--backend", metavar="scripted:FILE", help="a scripted model: FILE's transmissions"
    )
    p.add_argument(
        "--tools",
        default="",
        metavar="LIST",
        help="work tools granted, comma-separated: read, write, shell (default: none)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a shell command the model may run (a glob, such as 'pytest*'); repeatable",
    )
    p.add_argument("--max-turns", type=int, default=100, metavar="N", help="default 100")
    p.add_argument(
        "--max-new-tokens", type=int, default=1024, metavar="N", help="per turn; default 1024"
    )
    p.add_argument(
        "--think",
        default="adaptive:256",
        metavar="MODE[:TOKENS]",
        help="the reasoning budget: disabled, adaptive or fixed, with a THINK limit "
        "(default adaptive:256)",
    )
    p.add_argument(
        "--constrain",
        choices=["auto", "on", "off"],
        default="auto",
        help="constrained decoding of ACTs (default auto: on where llguidance is installed)",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy")
    p.add_argument(
        "--seed", type=int, help="the sampler's seed, and the session's ids: a run repeats"
    )
    p.add_argument("--shell-timeout", type=float, default=60.0, metavar="S", help="default 60 s")
    p.add_argument("--json", action="store_true", help="one summary object on stdout")

    p = cmd("smi", "the State Model Interface: conversations to ids, ids to blocks, audits")
    ssub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    vocab = "a tokenizer.json, a tokenizer folder, or rwkv-world"
    q = ssub.add_parser(
        "compile",
        help="conversations (JSON lines) to input_ids, labels and assistant masks",
        description='Compile conversations, one JSON object a line ({"messages": [...], '
        '"tools": [...], "ctrl": {...}} or {"transmissions": [...]}), to one line each of '
        '{"input_ids", "labels", "assistant_mask"}; all lines or none.',
    )
    q.add_argument("tokenizer", metavar="TOKENIZER", help=vocab)
    q.add_argument(
        "input",
        metavar="FILE",
        nargs="*",
        help="JSON-lines files, read in order (smllm run's run-N.smi.jsonl); default: stdin",
    )
    q.add_argument("-o", "--output", metavar="OUT", help="write OUT instead of standard output")
    q.add_argument("--install", action="store_true", help="append the SMI tokens if missing")
    _base_flag(q)
    q.add_argument("--lenient", action="store_true", help="accept what strict mode refuses")
    q.add_argument("--json", action="store_true", help="with -o: a summary object on stdout")
    q = ssub.add_parser(
        "parse",
        help="token ids to blocks, for reading a model's output",
        description="Parse token ids (a JSON array, an object with input_ids, or numbers "
        "separated by spaces, one stream a line) into blocks and transmissions. In the text "
        "output a payload's < followed by backslashes and | gets one more backslash (<|eot|> "
        "reads <\\|eot|>), so only structure reads <|; --json gives payloads as they are.",
    )
    q.add_argument("tokenizer", metavar="TOKENIZER", help=vocab)
    q.add_argument("input", metavar="FILE", nargs="?", default="-", help="default: stdin")
    q.add_argument(
        "--side",
        choices=["any", "model", "runtime"],
        default="any",
        help="whose stream it is: the model's, the runtime's, or either (any)",
    )
    q.add_argument(
        "--modality",
        action="append",
        metavar="NAME=RANGE",
        help="ids FIRST-LAST (both included; RANGE like 60000-60999) are tokens of modality "
        "NAME: they come back as runs named NAME (repeatable)",
    )
    q.add_argument("--install", action="store_true", help="append the SMI tokens if missing")
    _base_flag(q)
    q.add_argument("--lenient", action="store_true", help="report violations, don't stop")
    q.add_argument("--json", action="store_true")
    q = ssub.add_parser(
        "audit",
        help="which added tokens a payload could produce, and proof the compiler's path can't",
        description="Audit a vocabulary, with or without the SMI tokens: each added token's role "
        "(markup, forbidden to payloads, or content, payload text) and why, which naive encode "
        "paths let a payload reach it, what installing would add, and proof that the "
        "compiler's plain encoder reaches no forbidden id. Exit 0 when nothing is wrong, 1 "
        "when a payload reaches a forbidden id or an added token is unsafe.",
    )
    q.add_argument("tokenizer", metavar="TOKENIZER", help=vocab)
    _base_flag(q)
    q.add_argument("--json", action="store_true")
    q = ssub.add_parser(
        "install",
        help="a copy of a model folder with the SMI tokens in its tokenizer and embeddings",
        description="Read a local Hugging Face model folder (offline), append the SMI block to "
        "its tokenizer and grow the model's embeddings to match (new rows initialised from "
        "the mean of the old ones), and save both to OUT, a new folder: what smllm run --model "
        "and hf_runtime read. Already installed: the same ids, saved as they are.",
    )
    q.add_argument("model", metavar="MODEL", help="a local Hugging Face model folder")
    q.add_argument("-o", "--output", metavar="OUT", required=True, help="a new folder")
    q.add_argument("--json", action="store_true")

    p = cmd("completions", "print a shell completion script: bash, zsh or fish")
    p.add_argument("shell", metavar="SHELL", help="bash, zsh or fish")

    # run by the completion scripts at each TAB, not by people: hidden from help (and from
    # completion); main._fast_args reads it without this parser
    q = sub.add_parser("__complete")
    q.add_argument(
        "kind",
        metavar="KIND",
        help="what to list: machines (ids), sessions (keys, most recent first) or events "
        "(those the --session on the line offers)",
    )
    q.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        metavar="WORD",
        help="the command line's words before the cursor, whose --config and --session count",
    )

    p = cmd("info", "print what smllm knows: the machine file's JSON Schema")
    info_sub = p.add_subparsers(dest="action", metavar="WHAT", parser_class=_Parser, required=True)
    q = info_sub.add_parser("schema", help="the JSON Schema (2020-12) of machine files")
    q.add_argument("--write", metavar="PATH", help="write it to PATH instead of stdout")

    p = cmd("demo", "play a scripted agent through the example machine in a throw-away folder")
    p.add_argument("--keep", action="store_true", help="keep the folder and print its path")
    _json_help(top)
    return top


def _json_help(parser: argparse.ArgumentParser) -> None:
    """Every `--json` says what it prints (cli-and-harnesses.md §1), once, here."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _json_help(child)
        elif "--json" in action.option_strings and action.help is None:
            action.help = "print one JSON object (on exit 1 too)"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    return build().parse_args(argv)
