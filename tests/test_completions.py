"""`smllm completions`: each shell is asked, for real, for its completions of real command lines,
and the answers are compared with the lists written out below (issue 12 §3).

bash: the script's function, driven through COMP_WORDS/COMP_CWORD as bash's programmable
completion calls it. zsh: an interactive `zsh -f` under `zpty`, with compinit and the script
on its fpath, a Tab typed after the line, and compadd wrapped to print the matches it keeps
(zsh's own matching against the word typed). fish: `complete -C LINE`. A missing shell fails
the test, naming the package (scripts/test installs them).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import require_tool, smllm

COMMANDS = [
    "compile",
    "completions",
    "demo",
    "fire",
    "graph",
    "harness",
    "info",
    "init",
    "instance",
    "mcp",
    "new",
    "session",
    "smi",
    "statusline",
    "store",
    "validate",
]

#: line → the completions, sorted; options after a command that is complete are offered when
#: the word is empty too (bash, zsh), fish offers them only once the word starts with `-`
EXPECTED: dict[str, list[str]] = {
    "smllm ": [*COMMANDS, "--config", "--help", "--version"],
    "smllm s": ["session", "smi", "statusline", "store"],
    "smllm se": ["session"],
    "smllm i": ["info", "init", "instance"],
    "smllm --": ["--config", "--help", "--version"],
    "smllm --config x.toml va": ["validate"],
    "smllm harness ": ["hook", "install", "status", "uninstall", "--config", "--help"],
    "smllm harness install ": [
        "--config",
        "--force",
        "--help",
        "--json",
        "--scope",
        "--with",
        "--without",
    ],
    "smllm harness install --w": ["--with", "--without"],
    "smllm harness install claude --s": ["--scope"],
    "smllm harness status --": ["--config", "--help", "--json", "--scope"],
    "smllm fire --": ["--config", "--help", "--host", "--json", "--param", "--params", "--session"],
    "smllm fire --par": ["--param", "--params"],
    "smllm fire --session sm-abcdef planned --param size=small --": [
        "--config",
        "--help",
        "--host",
        "--json",
        "--param",
        "--params",
        "--session",
    ],
    "smllm session ": ["list", "new", "show", "--config", "--help"],
    "smllm session show ": ["--audit", "--config", "--help", "--json"],
    "smllm session show --": ["--audit", "--config", "--help", "--json"],
    "smllm session show --a": ["--audit"],
    "smllm session new --": ["--config", "--help", "--json"],
    "smllm session list --": ["--config", "--help", "--json"],
    "smllm instance ": ["list", "show", "--config", "--help"],
    "smllm instance show --": ["--config", "--help", "--json", "--machine"],
    "smllm instance list --": ["--config", "--help", "--json", "--machine", "--status"],
    "smllm new --": ["--config", "--dir", "--help", "--json", "--write"],
    "smllm info ": ["schema", "--config", "--help"],
    "smllm info schema --": ["--help", "--write"],
    "smllm graph --": ["--config", "--dot", "--help", "--json", "--mermaid"],
    "smllm statusline --": ["--color", "--config", "--help", "--json", "--session"],
    "smllm validate --": ["--config", "--help", "--info", "--json", "--warnings"],
    "smllm validate --w": ["--warnings"],
    "smllm completions ": ["--config", "--help"],
    "smllm demo --": ["--config", "--help", "--keep"],
    "smllm compile --": ["--config", "--help", "--output"],
    "smllm init --": ["--config", "--help", "--json", "--user"],
    "smllm mcp --": ["--config", "--help"],
    "smllm store ": ["migrate", "--config", "--help"],
    "smllm store migrate --": ["--config", "--help", "--json", "--keep", "--namespace"],
    "smllm session show sm-abcdef ": ["--audit", "--config", "--help", "--json"],
}


def expected(line: str, shell: str) -> list[str]:
    want = sorted(EXPECTED[line])
    if shell == "fish" and line.endswith(" "):
        want = [w for w in want if not w.startswith("-")]
    return want


def script(shell: str, folder: Path, env: dict[str, str]) -> Path:
    ran = smllm(["completions", shell], folder, env)
    assert (ran.code, ran.err) == (0, ""), ran.err
    path = folder / {"bash": "smllm.bash", "zsh": "_smllm", "fish": "smllm.fish"}[shell]
    path.write_text(ran.out)
    return path


def bash_completions(path: Path, lines: list[str]) -> list[list[str]]:
    """Each line's COMPREPLY, from `_smllm` called as `complete -F` calls it."""
    bash = require_tool("bash", "apt-get install bash")
    code = [f"source {path}"]
    for line in lines:
        words = " ".join(f"'{w}'" for w in line.split(" "))
        code += [
            f"COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))",
            f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()",
            '_smllm; printf "%s\\n" "${COMPREPLY[@]}"; echo "<end>"',
        ]
    ran = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    return [sorted(w for w in block.split("\n") if w) for block in ran.stdout.split("<end>\n")[:-1]]


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


def zsh_completions(path: Path, lines: list[str]) -> list[list[str]]:
    zsh = require_tool("zsh", "apt-get install zsh")
    ran = subprocess.run(
        [zsh, "-f", "-c", ZSH, "zsh", str(path.parent), *lines],
        capture_output=True,
        text=True,
        timeout=20 + 2 * len(lines),
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    blocks = ran.stdout.split("<end>\n")
    assert blocks[-1] == "" and len(blocks) == len(lines) + 1, ran.stdout
    return [sorted(w for w in block.replace("\r", "").split("\n") if w) for block in blocks[:-1]]


def fish_completions(path: Path, lines: list[str]) -> list[list[str]]:
    fish = require_tool("fish", "apt-get install fish")
    code = [f"source {path}"]
    for line in lines:
        code.append(f"complete -C '{line}'; echo '<end>'")
    ran = subprocess.run(
        [fish, "--no-config", "-c", "\n".join(code)], capture_output=True, text=True, timeout=30
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    blocks = ran.stdout.split("<end>\n")[:-1]
    return [sorted(w.split("\t")[0] for w in block.split("\n") if w) for block in blocks]


LINES = list(EXPECTED)


def test_bash(tmp_path: Path, env: dict[str, str]) -> None:
    path = script("bash", tmp_path, env)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    got = dict(zip(LINES, bash_completions(path, LINES), strict=True))
    assert got == {line: expected(line, "bash") for line in LINES}


def test_zsh(tmp_path: Path, env: dict[str, str]) -> None:
    path = script("zsh", tmp_path, env)
    assert subprocess.run(["zsh", "-n", str(path)]).returncode == 0
    got = dict(zip(LINES, zsh_completions(path, LINES), strict=True))
    assert got == {line: expected(line, "zsh") for line in LINES}


def test_fish(tmp_path: Path, env: dict[str, str]) -> None:
    path = script("fish", tmp_path, env)
    got = dict(zip(LINES, fish_completions(path, LINES), strict=True))
    assert got == {line: expected(line, "fish") for line in LINES}


def test_the_drivers_see_a_broken_script(tmp_path: Path) -> None:
    """Each way of asking a shell reports what the script offers, not a fixed answer: a
    script that offers `nothing-else` is heard as such."""
    bash = tmp_path / "b.bash"
    bash.write_text("_smllm() { COMPREPLY=(nothing-else); }\ncomplete -F _smllm smllm\n")
    assert bash_completions(bash, ["smllm ", "smllm zz"]) == [["nothing-else"]] * 2
    zsh = tmp_path / "z" / "_smllm"
    zsh.parent.mkdir()
    zsh.write_text("#compdef smllm\ncompadd -- nothing-else\n")
    assert zsh_completions(zsh, ["smllm ", "smllm zz"]) == [["nothing-else"], []]
    fish = tmp_path / "f.fish"
    fish.write_text("complete -c smllm -f -a nothing-else\n")
    assert fish_completions(fish, ["smllm ", "smllm zz"]) == [["nothing-else"], []]


def test_another_shell(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["completions", "tcsh"], tmp_path, env)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "error: no completions for tcsh (shells: bash, zsh, fish)\n"
