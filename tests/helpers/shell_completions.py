"""Asking the shells, for real, for their completions of command lines with the script of
`smllm completions SHELL` (test_completions.py, test_completions_values.py).

bash: the script's function, driven through COMP_WORDS/COMP_CWORD as bash's programmable
completion calls it. zsh: an interactive `zsh -f` under `zpty`, with compinit and the script
on its fpath, a Tab typed after the line, and compadd wrapped to print the matches it keeps.
fish: `complete -C LINE`. `logged_smllm` puts a `smllm` first on PATH that logs what the
scripts ask of it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import require_tool, smllm


def fish_form(line: str, words: list[str]) -> list[str]:
    """fish offers a value typed after `=` as the whole word: `--scope=user`."""
    last = line.split(" ")[-1]
    return [last[: last.rindex("=") + 1] + w for w in words] if "=" in last else words


def script(shell: str, folder: Path, env: dict[str, str]) -> Path:
    ran = smllm(["completions", shell], folder, env)
    assert (ran.code, ran.err) == (0, ""), ran.err
    path = folder / {"bash": "smllm.bash", "zsh": "_smllm", "fish": "smllm.fish"}[shell]
    path.write_text(ran.out)
    return path


def logged_smllm(folder: Path, env: dict[str, str]) -> tuple[dict[str, str], Path]:
    """ENV with a `smllm` first on PATH that runs this smllm and logs each call's arguments
    (one line each) to the returned file: what the scripts ask of smllm at a TAB."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    log = folder / "calls.log"
    log.write_text("")
    command = bin_dir / "smllm"
    command.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{sys.executable}" -m smllm "$@"\n')
    command.chmod(0o755)
    return {**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}"}, log


def bash_words(line: str) -> list[str]:
    """COMP_WORDS as bash makes them of LINE: split at spaces, and at `=`, a word of its own
    (COMP_WORDBREAKS: `--scope=us` is --scope, =, us; `--scope=` is --scope, =)."""
    words = []
    for word in line.split(" "):
        words += [piece for piece in re.split("(=)", word) if piece] or [""]
    return words


def bash_completions(
    path: Path, lines: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> list[list[str]]:
    """Each line's COMPREPLY in its order, from `_smllm` called as `complete -F` calls it."""
    bash = require_tool("bash", "apt-get install bash")
    code = [f"source {path}"]
    for line in lines:
        words = " ".join(f"'{w}'" for w in bash_words(line))
        code += [
            f"COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))",
            f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()",
            '_smllm; printf "%s\\n" "${COMPREPLY[@]}"; echo "<end>"',
        ]
    ran = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        timeout=30 + 2 * len(lines),
        cwd=cwd,
        env=env,
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    return [[w for w in block.split("\n") if w] for block in ran.stdout.split("<end>\n")[:-1]]


#: for each line: a Tab after it in a new interactive zsh under zpty; compadd wrapped so that
#: it prints the matches zsh keeps for the word typed (`-O`: kept without being added)
ZSH = r"""
zmodload zsh/zpty
folder=$1; shift
for line in "$@"; do
    zpty z zsh -f -i
    zpty -w z "PROMPT=''; fpath=(${(q)folder} \$fpath); autoload -Uz compinit"
    zpty -w z "compinit -u -d ${(q)folder}/.zcompdump"
    zpty -w z "bindkey '^I' complete-word; zstyle ':completion:*' insert-tab false"
    zpty -w z 'compprefuncs=(_nul); comppostfuncs=(_nul exit); _nul() { print -n -- "<nul>" }'
    zpty -w z 'compadd() { local -a hits; builtin compadd -O hits "$@"; print -rl -- $hits }'
    zpty -w z 'print "<rea""dy>"'
    zpty -r z out '*<ready>*'
    zpty -w -n z "$line"$'\t'
    zpty -r z out '*<nul>*<nul>*'
    print -r -- "${${out#*<nul>}%<nul>*}"
    print -r -- "<end>"
    zpty -d z
done
"""


def zsh_completions(
    path: Path, lines: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> list[list[str]]:
    """Each line's matches, in the order compadd was given them."""
    zsh = require_tool("zsh", "apt-get install zsh")
    ran = subprocess.run(
        [zsh, "-f", "-c", ZSH, "zsh", str(path.parent), *lines],
        capture_output=True,
        text=True,
        timeout=20 + 3 * len(lines),
        cwd=cwd,
        env=env,
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    blocks = ran.stdout.split("<end>\n")
    assert blocks[-1] == "" and len(blocks) == len(lines) + 1, ran.stdout
    return [[w for w in block.replace("\r", "").split("\n") if w] for block in blocks[:-1]]


def fish_completions(
    path: Path, lines: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> list[list[str]]:
    """Each line's completions in the order fish gives them."""
    fish = require_tool("fish", "apt-get install fish")
    code = [f"source {path}"]
    for line in lines:
        code.append(f"complete -C '{line}'; echo '<end>'")
    ran = subprocess.run(
        [fish, "--no-config", "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        timeout=30 + 2 * len(lines),
        cwd=cwd,
        env=env,
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    blocks = ran.stdout.split("<end>\n")[:-1]
    return [[w.split("\t")[0] for w in block.split("\n") if w] for block in blocks]


DRIVERS = {"bash": bash_completions, "zsh": zsh_completions, "fish": fish_completions}


def completions_of(
    shell: str, path: Path, lines: list[str], cwd: Path, env: dict[str, str]
) -> dict[str, list[str]]:
    """line → what SHELL offers at its end, in the order offered."""
    return dict(zip(lines, DRIVERS[shell](path, lines, cwd, env), strict=True))
