"""`smllm completions bash|zsh|fish`: completion scripts made from the argument parser itself,
so they can't fall behind the commands; and `smllm __complete KIND [WORD…]`, the hidden helper
those scripts run at a TAB for the values only smllm knows (issue 20 §8).

A script offers, at the word under the cursor:

- after an option that takes a value (`--scope `, `--scope=`): that option's values (its
  `choices`, or those `_extra_values` names), and nothing else (none for `--config FILE`);
- where a positional argument goes and the word doesn't start with `-`: its values;
- else the subcommands and the long options of the command typed so far.

Values written out in the script: every `choices` of the parser, the shells, the harness names,
a harness's parts (`--without`, `--with`: those of the harness named on the line, all of them
before one is). Values asked of the helper, only where one is wanted: machine ids (the configs
found from the current folder, or the line's `--config`), session keys (the user store, most
recently active first) and the events the line's `--session` offers now. The helper never
fails loudly: whatever goes wrong, it prints nothing and exits 0 (and the scripts drop its
stderr). It runs at every such TAB, so it skips argparse (main._fast_args reads it) and
imports only what its kind reads: the user store for sessions, the compiled cache's header for
machines, and the view's part of the engine for events.
"""

from __future__ import annotations

import sys

from .common import Exit

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    import argparse
    from argparse import Namespace

__all__ = ["SHELLS", "Spec", "complete", "completions", "table"]

SHELLS = ("bash", "zsh", "fish")

#: a value list: the words themselves, or "@KIND": @machines, @sessions, @events asked of the
#: helper at the TAB; @parts (the parts of the harness named on the line) and @param
#: (`stateMachine=ID`, an id asked of the helper) worked out by the script
Values = tuple[str, ...] | str


def _extra_values() -> dict[tuple[str, str], Values]:
    """(command path, option or positional's dest) → its values, where the parser has no
    `choices` to say them (its help texts do: these are the same lists)."""
    from ..machine.configs.config import HARNESS_PARTS

    names = tuple(HARNESS_PARTS)
    return {
        ("completions", "shell"): SHELLS,
        **{(f"harness {action}", "name"): names for action in ("install", "status", "uninstall")},
        ("harness install", "--without"): "@parts",
        ("harness install", "--with"): "@parts",
        ("graph", "id"): "@machines",
        ("instance list", "--machine"): "@machines",
        ("instance show", "--machine"): "@machines",
        ("session show", "key"): "@sessions",
        ("fire", "--session"): "@sessions",
        ("statusline", "--session"): "@sessions",
        ("fire", "event"): "@events",
        ("fire", "--param"): "@param",
    }


class Spec:
    """What one command path offers: its subcommands (those `--help` lists), its long
    options, every option string that takes a value (so that the value isn't read as a
    positional), and the values by option (`--scope`) or by positional index (`#0`)."""

    def __init__(self) -> None:
        self.subs: list[str] = []
        self.opts: list[str] = []
        self.takes: list[str] = []
        self.values: dict[str, Values] = {}


def table() -> dict[str, Spec]:
    """Command path ("" for the top, "session", "session show", …) → its Spec. A subcommand
    hidden from `--help` (`harness hook`, `__complete`) is offered nowhere."""
    import argparse

    from .parser import build

    extra = _extra_values()
    used: set[tuple[str, str]] = set()
    out: dict[str, Spec] = {}

    def values(path: str, name: str, action: argparse.Action) -> Values | None:
        if (path, name) in extra:
            used.add((path, name))
            return extra[path, name]
        return tuple(str(c) for c in action.choices) if action.choices else None

    def walk(path: str, p: argparse.ArgumentParser) -> None:
        spec = out[path] = Spec()
        children: list[tuple[str, argparse.ArgumentParser]] = []
        positionals = 0
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                shown = {choice.dest for choice in action._choices_actions}
                children += [(n, c) for n, c in action.choices.items() if n in shown]
            elif action.option_strings:
                long = [o for o in action.option_strings if o.startswith("--")]
                spec.opts += long
                if action.nargs != 0:
                    spec.takes += action.option_strings
                    found = values(path, long[0], action) if long else None
                    if found is not None:
                        spec.values.update((o, found) for o in long)
            else:
                found = values(path, action.dest, action)
                if found is not None:
                    spec.values[f"#{positionals}"] = found
                positionals += 1
        spec.subs = [name for name, _ in children]
        for name, child in children:
            walk(f"{path} {name}".strip(), child)

    walk("", build())
    # an _extra_values entry that names no argument is a parser change it missed
    assert used == set(extra), sorted(set(extra) - used)
    return out


def _parts() -> dict[str, tuple[str, ...]]:
    """Each harness's parts, and "*" (no harness named yet): every part, once, in order."""
    from ..machine.configs.config import HARNESS_PARTS

    every = tuple(dict.fromkeys(p for parts in HARNESS_PARTS.values() for p in parts))
    return {**HARNESS_PARTS, "*": every}


def _words(values: Values) -> str:
    return values if isinstance(values, str) else " ".join(values)


# -- bash and zsh -------------------------------------------------------------------------------

#: the shells' common walk, in bash: the words before the cursor give the command path (a word
#: naming a subcommand of the path so far extends it), the positionals given to its last
#: command (`n`, the first one `name`), and `key`, the option whose value the cursor is at
_BASH_MAIN = r"""_smllm() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmdpath="" word="" key="" name="" value=""
    local choices="" i=0 n=0 glue=0 last=0
    local -a words=()
    # bash splits a word at `=` (COMP_WORDBREAKS): `--scope=us` comes as --scope, =, us. The
    # pieces are joined back into the word typed; only the part after `=` is completed.
    for (( i = 1; i <= COMP_CWORD; i++ )); do
        word="${COMP_WORDS[i]}"
        if [[ $word == "=" && ${#words[@]} -gt 0 ]]; then
            words[${#words[@]}-1]+="="
            glue=1
        elif (( glue )); then
            words[${#words[@]}-1]+="$word"
            glue=0
        else
            words+=("$word")
        fi
    done
    [[ $cur == "=" ]] && cur=""
    last=$(( ${#words[@]} - 1 ))
    for (( i = 0; i < last; i++ )); do
        word="${words[i]}"
        if [[ $word == -* ]]; then
            if [[ $word != *=* ]] && _smllm_takes "$cmdpath|$word"; then
                if (( i + 1 == last )); then
                    key="$word"
                    break
                fi
                i=$(( i + 1 ))
            fi
        else
            _smllm_subs "$cmdpath"
            if [[ " $choices " == *" $word "* ]]; then
                cmdpath="${cmdpath:+$cmdpath }$word"
                n=0
                name=""
            else
                [[ $n == 0 ]] && name="$word"
                n=$(( n + 1 ))
            fi
        fi
    done
    value="${words[last]}"
    if [[ -z $key && $value == --*=* ]] && _smllm_takes "$cmdpath|${value%%=*}"; then
        key="${value%%=*}"
        value="${value#*=}"
    fi
    choices=""
    if [[ -n $key ]]; then
        _smllm_values "$cmdpath|$key"
    elif [[ $value != -* ]]; then
        _smllm_values "$cmdpath|#$n"
    fi
    if [[ -z $key && -z $choices ]]; then
        _smllm_words "$cmdpath"
    elif [[ $choices == @parts ]]; then
        _smllm_parts "$name"
    elif [[ $choices == @param ]]; then
        choices=""
        [[ $value == stateMachine=* ]] && choices=@machines
    fi
    if [[ $choices == @* ]]; then
        # asked of smllm itself, in the order it gives (sessions: most recent first); each
        # word kept as is (compgen -W would expand it)
        compopt -o nosort 2>/dev/null
        while IFS= read -r word; do
            [[ -n $word && $word == "$cur"* ]] && COMPREPLY+=("$word")
        done < <("${COMP_WORDS[0]}" __complete "${choices#@}" "${words[@]:0:last}" 2>/dev/null)
    else
        COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    fi
    return 0
}"""


#: bash's walk, in zsh (whose words keep `--scope=us` whole); `cmdpath`, not `path`, which zsh
#: ties to PATH
_ZSH_MAIN = r"""_smllm() {
    local cmdpath="" word="" key="" name="" out=""
    local -i i=2 n=0
    local -a choices
    while (( i < CURRENT )); do
        word=${(Q)words[i]}
        (( i += 1 ))
        if [[ $word == -* ]]; then
            if [[ $word != *=* ]] && _smllm_takes "$cmdpath|$word"; then
                if (( i == CURRENT )); then
                    key=$word
                    break
                fi
                (( i += 1 ))
            fi
        else
            _smllm_subs "$cmdpath"
            if (( ${choices[(Ie)$word]} )); then
                cmdpath="${cmdpath:+$cmdpath }$word"
                n=0
                name=""
            else
                (( n == 0 )) && name=$word
                (( n += 1 ))
            fi
        fi
    done
    if [[ -z $key && $PREFIX == --*=* ]] && _smllm_takes "$cmdpath|${PREFIX%%=*}"; then
        key=${PREFIX%%=*}
        compset -P 1 '*='
    fi
    choices=()
    if [[ -n $key ]]; then
        _smllm_values "$cmdpath|$key"
    elif [[ $PREFIX != -* ]]; then
        _smllm_values "$cmdpath|#$n"
    fi
    if [[ -z $key && ${#choices} == 0 ]]; then
        _smllm_words "$cmdpath"
    elif [[ $choices[1] == @parts ]]; then
        _smllm_parts "$name"
    elif [[ $choices[1] == @param ]]; then
        choices=()
        compset -P 'stateMachine=' && choices=(@machines)
    fi
    if [[ $choices[1] == @* ]]; then
        # asked of smllm itself, in the order it gives (sessions: most recent first)
        out=$(${(Q)words[1]} __complete ${choices[1]#@} "${(@Q)words[2,CURRENT-1]}" 2>/dev/null)
        compadd -V smllm -- ${(f)out}
    else
        compadd -- $choices
    fi
}"""


def _sh(specs: dict[str, Spec], zsh: bool) -> list[str]:
    """The tables that bash's and zsh's walks read, as shell functions: each sets `choices`
    (a string in bash, an array in zsh) or, for `_smllm_takes`, answers by its status."""

    def arms(rows: dict[str, str], pattern: str = '"{}"') -> list[str]:
        listed = "({})" if zsh else '"{}"'
        return [
            f"        {pattern.format(key)}) choices={listed.format(words)} ;;"
            for key, words in rows.items()
        ]

    parts = _parts()

    takes = [
        "        " + "|".join(f'"{path}|{o}"' for o in spec.takes) + ") return 0 ;;"
        for path, spec in specs.items()
        if spec.takes
    ]
    values = {
        f"{path}|{k}": _words(v) for path, spec in specs.items() for k, v in spec.values.items()
    }
    empty = "    choices=()" if zsh else '    choices=""'
    return [
        "_smllm_subs() {",
        empty,
        '    case "$1" in',
        *arms({path: " ".join(spec.subs) for path, spec in specs.items() if spec.subs}),
        "    esac",
        "}",
        "_smllm_words() {",
        empty,
        '    case "$1" in',
        *arms({path: " ".join(spec.subs + spec.opts) for path, spec in specs.items()}),
        "    esac",
        "}",
        "_smllm_takes() {",
        '    case "$1" in',
        *takes,
        "    esac",
        "    return 1",
        "}",
        "_smllm_values() {",
        '    case "$1" in',
        *arms(values),
        "    esac",
        "}",
        "_smllm_parts() {",
        '    case "$1" in',
        *arms({h: " ".join(p) for h, p in parts.items() if h != "*"}),
        *arms({"*": " ".join(parts["*"])}, pattern="*"),
        "    esac",
        "}",
    ]


def _bash(specs: dict[str, Spec]) -> str:
    lines = ["# bash completion for smllm (smllm completions bash)", _BASH_MAIN, *_sh(specs, False)]
    return "\n".join([*lines, "complete -F _smllm smllm", ""])


def _zsh(specs: dict[str, Spec]) -> str:
    head = ["#compdef smllm", "# zsh completion for smllm (smllm completions zsh)", _ZSH_MAIN]
    return "\n".join([*head, *_sh(specs, True), '_smllm "$@"', ""])


# -- fish ---------------------------------------------------------------------------------------

#: bash's walk, in fish. fish itself knows which options take a value (`-x`) and offers only
#: their values after them (`--scope `, `--scope=`); the walk finds the command path and the
#: positionals for the conditions.
_FISH_MAIN = r"""function __smllm_state
    # the command path, how many positionals it has before the cursor, and the first one
    set -l words (commandline -opc)
    set -e words[1]
    set -l path ''
    set -l n 0
    set -l name ''
    set -l skip 0
    for word in $words
        if test $skip = 1
            set skip 0
        else if string match -q -- '-*' $word
            if not string match -q -- '*=*' $word; and __smllm_takes "$path|$word"
                set skip 1
            end
        else if contains -- $word (__smllm_subs $path)
            set path (string trim -- "$path $word")
            set n 0
            set name ''
        else
            test $n = 0; and set name $word
            set n (math $n + 1)
        end
    end
    printf '%s\n' "$path" $n "$name"
end
function __smllm_at
    set -l state (__smllm_state)
    test "$state[1]" = "$argv[1]"
end
function __smllm_pos
    string match -q -- '-*' (commandline -ct); and return 1
    set -l state (__smllm_state)
    test "$state[1]" = "$argv[1]"; and test "$state[2]" = "$argv[2]"
end
function __smllm_ask
    # asked of smllm itself, in the order it gives (sessions: most recent first)
    set -l words (commandline -opc)
    set -l command $words[1]
    set -e words[1]
    $command __complete $argv[1] $words 2>/dev/null
end
function __smllm_param
    string match -q -- 'stateMachine=*' (commandline -ct); or return 0
    __smllm_ask machines | string replace -r -- '^' 'stateMachine='
end"""


def _fish_values(values: Values) -> str:
    if values == "@parts":
        return "-a '(__smllm_parts)'"
    if values == "@param":
        return "-k -a '(__smllm_param)'"
    if isinstance(values, str):
        return f"-k -a '(__smllm_ask {values[1:]})'"
    return f"-a '{' '.join(values)}'"


def _fish(specs: dict[str, Spec]) -> str:
    subs = [
        line
        for path, spec in specs.items()
        if spec.subs
        for line in (f"        case '{path}'", f"            printf '%s\\n' {' '.join(spec.subs)}")
    ]
    takes = [
        "        case " + " ".join(f"'{path}|{o}'" for o in spec.takes) + "\n            return 0"
        for path, spec in specs.items()
        if spec.takes
    ]
    parts = [
        line
        for h, p in _parts().items()
        for line in (f"        case '{h}'", f"            printf '%s\\n' {' '.join(p)}")
    ]
    lines = [
        "# fish completion for smllm (smllm completions fish)",
        "function __smllm_subs",
        '    switch "$argv[1]"',
        *subs,
        "    end",
        "end",
        "function __smllm_takes",
        '    switch "$argv[1]"',
        *takes,
        "    end",
        "    return 1",
        "end",
        _FISH_MAIN,
        "function __smllm_parts",
        "    set -l state (__smllm_state)",
        '    switch "$state[3]"',
        *parts,
        "    end",
        "end",
        "complete -c smllm -f",
    ]
    for path, spec in specs.items():
        cond = f"'__smllm_at \"{path}\"'"
        if spec.subs:
            lines.append(f"complete -c smllm -n {cond} -a '{' '.join(spec.subs)}'")
        for opt in spec.opts:
            line = f"complete -c smllm -n {cond} -l {opt[2:]}"
            if opt in spec.takes:
                line += " -x"
                if opt in spec.values:
                    line += " " + _fish_values(spec.values[opt])
            lines.append(line)
        for key, values in spec.values.items():
            if key.startswith("#"):
                at = f"'__smllm_pos \"{path}\" {key[1:]}'"
                lines.append(f"complete -c smllm -n {at} {_fish_values(values)}")
    return "\n".join(lines) + "\n"


def completions(args: Namespace) -> int:
    if args.shell not in SHELLS:
        raise Exit(2, f"no completions for {args.shell} (shells: {', '.join(SHELLS)})")
    render = {"bash": _bash, "zsh": _zsh, "fish": _fish}[args.shell]
    sys.stdout.write(render(table()))
    return 0


# -- the helper: `smllm __complete KIND [WORD…]` ------------------------------------------------


def complete(args: Namespace) -> int:
    """Print the values of KIND, one a line, for the command line WORDS (those before the
    cursor, the command's name left out). Prints nothing and exits 0 on any error: a TAB
    never shows a traceback, an error line or a half-written list."""
    try:
        found = _ask(str(args.kind), [str(w) for w in args.words])
    except Exception:  # whatever it is, the shell gets nothing
        return 0
    # one word a line: a value that isn't one printable word (none that smllm makes) is left out
    found = [word for word in found if word.isprintable() and word and " " not in word]
    if found:
        sys.stdout.write("".join(f"{word}\n" for word in found))
    return 0


def _ask(kind: str, words: list[str]) -> list[str]:
    if kind == "machines":
        return _machines(words)
    if kind == "sessions":
        from ..store.user import user_store

        return [s.key for s in user_store().sessions()]
    if kind == "events":
        return _events(words)
    return []


def _option(words: list[str], name: str) -> str | None:
    """The value the last `NAME VALUE` or `NAME=VALUE` among WORDS gives, if any."""
    value = None
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith(f"{name}="):
            value = word[len(name) + 1 :]
    return value


def _machines(words: list[str]) -> list[str]:
    """The ids of the machines the line's command would read: the configs found from the
    current folder, or `--config` (SMLLM_CONFIG), as every command finds them; through the
    compiled cache's header, which a warm cache reads without unpickling a machine."""
    import os

    from ..machine.configs.cache import summary_cached
    from ..machine.configs.config import find_configs

    explicit = _option(words, "--config") or os.environ.get("SMLLM_CONFIG") or None
    if explicit is not None and not os.path.isfile(explicit):
        return []
    configs = find_configs(os.getcwd(), explicit)
    return list(summary_cached(configs).machines) if configs else []


def _events(words: list[str]) -> list[str]:
    """The events the line's `--session` offers now, as its block lists them; without one,
    `enter` (the only event `fire` takes without a session).

    The session's view as `smllm session show` gets it, less its one write: the line about a
    call its client stopped waiting for stays for the agent's next reply (a TAB mustn't take
    it)."""
    key = _option(words, "--session")
    if key is None:
        return ["enter"]
    from ..api.app import App

    events = App().view(key, tell_late=False).reply.events
    return [item.name for item in events.items] if events is not None else []
