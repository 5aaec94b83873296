"""`smllm completions bash|zsh|fish`: completion scripts made from the argument parser itself,
so they can't fall behind the commands."""

from __future__ import annotations

import argparse
import sys

from .common import Exit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from argparse import Namespace

__all__ = ["completions", "words"]

SHELLS = ("bash", "zsh", "fish")


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(p: argparse.ArgumentParser) -> list[str]:
    return [o for a in p._actions for o in a.option_strings if o.startswith("--")]


def words() -> dict[str, tuple[list[str], list[str]]]:
    """Command path ("" for the top, "session", "session show", …) → (subcommands, options)."""
    from .parser import build

    out: dict[str, tuple[list[str], list[str]]] = {}

    def walk(path: str, p: argparse.ArgumentParser) -> None:
        subs = _subparsers(p)
        out[path] = (list(subs), _options(p))
        for name, sub in subs.items():
            walk(f"{path} {name}".strip(), sub)

    walk("", build())
    return out


def _bash(table: dict[str, tuple[list[str], list[str]]]) -> str:
    cases = []
    for path, (subs, opts) in table.items():
        cases.append(f'        "{path}") choices="{" ".join(subs + opts)}" ;;')
    return "\n".join(
        [
            "# bash completion for smllm (smllm completions bash)",
            "_smllm() {",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" path="" word subs',
            '    for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do',
            '        case "$word" in -*) continue ;; esac',
            '        subs=" $(_smllm_words "$path") "',
            '        case "$subs" in *" $word "*) path="${path:+$path }$word" ;; esac',
            "    done",
            '    COMPREPLY=($(compgen -W "$(_smllm_words "$path")" -- "$cur"))',
            "}",
            "_smllm_words() {",
            '    local choices=""',
            '    case "$1" in',
            *cases,
            "    esac",
            '    echo "$choices"',
            "}",
            "complete -F _smllm smllm",
            "",
        ]
    )


def _zsh(table: dict[str, tuple[list[str], list[str]]]) -> str:
    cases = [
        f'        "{path}") choices=({" ".join(subs + opts)}) ;;'
        for path, (subs, opts) in table.items()
    ]
    return "\n".join(
        [
            "#compdef smllm",
            "# zsh completion for smllm (smllm completions zsh)",
            "_smllm() {",
            '    local path="" word',
            "    local -a choices",
            "    for word in ${words[2,CURRENT-1]}; do",
            "        [[ $word == -* ]] && continue",
            '        _smllm_words "$path"',
            '        (( ${choices[(Ie)$word]} )) && path="${path:+$path }$word"',
            "    done",
            '    _smllm_words "$path"',
            "    compadd -- $choices",
            "}",
            "_smllm_words() {",
            "    choices=()",
            '    case "$1" in',
            *cases,
            "    esac",
            "}",
            '_smllm "$@"',
            "",
        ]
    )


def _fish(table: dict[str, tuple[list[str], list[str]]]) -> str:
    # The command path is found as bash's and zsh's scripts find it (a word that names a
    # subcommand of the path so far extends it; options are skipped), so that a subcommand
    # name used at two places (`new`, `show`, `list`, `compile`) offers only its own words.
    cases = []
    for path, (subs, _opts) in table.items():
        if subs:
            cases += [f"        case '{path}'", f"            printf '%s\\n' {' '.join(subs)}"]
    lines = [
        "# fish completion for smllm (smllm completions fish)",
        "function __smllm_subs",
        '    switch "$argv[1]"',
        *cases,
        "    end",
        "end",
        "function __smllm_path",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l path ''",
        "    for word in $words",
        "        string match -q -- '-*' $word; and continue",
        "        if contains -- $word (__smllm_subs $path)",
        '            set path (string trim -- "$path $word")',
        "        end",
        "    end",
        '    echo "$path"',
        "end",
        "function __smllm_at",
        "    set -l path (__smllm_path)",
        '    test "$path" = "$argv[1]"',
        "end",
        "complete -c smllm -f",
    ]
    for path, (subs, opts) in table.items():
        cond = f"'__smllm_at \"{path}\"'"
        if subs:
            lines.append(f"complete -c smllm -n {cond} -a '{' '.join(subs)}'")
        for opt in opts:
            lines.append(f"complete -c smllm -n {cond} -l {opt[2:]}")
    return "\n".join(lines) + "\n"


def completions(args: Namespace) -> int:
    if args.shell not in SHELLS:
        raise Exit(2, f"no completions for {args.shell} (shells: {', '.join(SHELLS)})")
    render = {"bash": _bash, "zsh": _zsh, "fish": _fish}[args.shell]
    sys.stdout.write(render(words()))
    return 0
