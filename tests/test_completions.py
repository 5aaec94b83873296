"""`smllm completions`: each shell is asked, for real, for its completions of real command lines,
and the answers are compared with the lists written out below (issue 12 §3).

bash: the script's function, driven through COMP_WORDS/COMP_CWORD as bash's programmable
completion calls it. zsh: an interactive `zsh -f` under `zpty`, with compinit and the script
on its fpath, a Tab typed after the line, and compadd wrapped to print the matches it keeps
(zsh's own matching against the word typed). fish: `complete -C LINE`. A missing shell fails
the test, naming the package (scripts/test installs them).

The lines here need nothing but the script (issue 20 §8: values the parser knows are written
into it); the `smllm` the scripts would run for a value only smllm knows is one that logs its
calls, and none is made. tests/test_completions_values.py asks for those values in a project.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool, smllm
from helpers.shell_completions import (
    bash_completions,
    bash_words,
    completions_of,
    fish_completions,
    fish_form,
    logged_smllm,
    script,
    zsh_completions,
)

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
    "run",
    "session",
    "smi",
    "statusline",
    "store",
    "validate",
]

NAMES = ["agents", "claude", "codex", "copilot", "opencode"]
PARTS = ["hooks", "instructions", "mcp", "permissions", "plugin", "statusline"]
SCOPES = ["project", "user"]
INSTALL_OPTIONS = ["--config", "--force", "--help", "--json", "--scope", "--with", "--without"]

#: line → the completions, sorted; options after a command that is complete are offered when
#: the word is empty too (bash, zsh), fish offers them only once the word starts with `-`. A
#: value after `=` is offered alone by bash and zsh, as the whole word by fish (`expected`).
EXPECTED: dict[str, list[str]] = {
    "smllm ": [*COMMANDS, "--config", "--help", "--version"],
    "smllm s": ["session", "smi", "statusline", "store"],
    "smllm se": ["session"],
    "smllm i": ["info", "init", "instance"],
    "smllm --": ["--config", "--help", "--version"],
    "smllm --config x.toml va": ["validate"],
    "smllm _": [],
    # `hook` (run by the clients) and `__complete` (by these scripts) are hidden from --help
    "smllm harness ": ["install", "status", "uninstall", "--config", "--help"],
    "smllm harness install --": INSTALL_OPTIONS,
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
    "smllm completions --": ["--config", "--help"],
    "smllm demo --": ["--config", "--help", "--keep"],
    "smllm compile --": ["--config", "--help", "--output"],
    "smllm init --": ["--config", "--help", "--json", "--user"],
    "smllm mcp --": ["--config", "--help"],
    "smllm store ": ["migrate", "--config", "--help"],
    "smllm store migrate --": ["--config", "--help", "--json", "--keep", "--namespace"],
    "smllm session show sm-abcdef ": ["--audit", "--config", "--help", "--json"],
    # positional values: the shells, the harness names
    "smllm completions ": ["bash", "fish", "zsh"],
    "smllm completions z": ["zsh"],
    "smllm --config x.toml completions b": ["bash"],
    "smllm completions fish ": ["--config", "--help"],
    "smllm harness install ": NAMES,
    "smllm harness install c": ["claude", "codex", "copilot"],
    "smllm harness status ": NAMES,
    "smllm harness uninstall o": ["opencode"],
    "smllm harness install --scope user ": NAMES,
    "smllm harness install claude ": INSTALL_OPTIONS,
    # option values: each option's choices, nothing else after an option that takes a value
    "smllm harness install --scope ": SCOPES,
    "smllm harness status --scope u": ["user"],
    "smllm harness uninstall codex --scope ": SCOPES,
    "smllm harness install --scope=": SCOPES,
    "smllm harness install --json --scope=p": ["project"],
    "smllm statusline --color ": ["always", "auto", "never"],
    "smllm statusline --json --color a": ["always", "auto"],
    "smllm statusline --color=n": ["never"],
    "smllm instance list --status ": ["active", "completed", "interrupted", "paused"],
    "smllm instance list --status paused --status c": ["completed"],
    "smllm smi parse --side ": ["any", "model", "runtime"],
    "smllm smi parse tok.json --side r": ["runtime"],
    "smllm --config ": [],
    "smllm fire --params ": [],
    "smllm compile -o out.json ": ["--config", "--help", "--output"],
    # a harness's parts: those of the harness named on the line, all of them before one is
    "smllm harness install --without ": PARTS,
    "smllm harness install claude --without ": [
        "hooks",
        "instructions",
        "mcp",
        "permissions",
        "statusline",
    ],
    "smllm harness install codex --with ": ["hooks", "instructions", "mcp"],
    "smllm harness install --without mcp opencode --with ": ["instructions", "mcp", "plugin"],
    "smllm harness install agents --without=": ["instructions"],
    "smllm harness install copilot --scope user --without h": ["hooks"],
    # a value that smllm alone knows isn't asked for here (no --session, no stateMachine=)
    "smllm fire --param ": [],
    "smllm fire --param size=": [],
}


def expected(line: str, shell: str) -> list[str]:
    want = sorted(EXPECTED[line])
    if shell == "fish":
        if line.endswith(" "):
            want = [w for w in want if not w.startswith("-")]
        want = fish_form(line, want)
    return want


LINES = list(EXPECTED)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_static_words(shell: str, tmp_path: Path, env: dict[str, str]) -> None:
    path = script(shell, tmp_path, env)
    if shell != "fish":
        assert subprocess.run([shell, "-n", str(path)]).returncode == 0
    logged, log = logged_smllm(tmp_path, env)
    got = completions_of(shell, path, LINES, tmp_path, logged)
    assert {line: sorted(words) for line, words in got.items()} == {
        line: expected(line, shell) for line in LINES
    }
    assert log.read_text() == ""  # smllm itself was asked nothing


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


def test_bash_words_are_bashs() -> None:
    """bash_words splits a line as bash's readline does for COMP_WORDS: asked of a real
    interactive bash under a pty, whose completion function prints COMP_WORDS at a Tab."""
    import os
    import pty
    import select
    import time

    bash = require_tool("bash", "apt-get install bash")
    lines = ["smllm harness install --scope=", "smllm fire --param stateMachine=d", "smllm a b"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(bash, [bash, "--norc", "--noprofile", "-i"])
    heard = ""

    def until(pattern: str) -> re.Match[str]:
        nonlocal heard
        deadline = time.monotonic() + 20
        while (found := re.search(pattern, heard)) is None:
            assert time.monotonic() < deadline, heard
            if select.select([fd], [], [], 0.1)[0]:
                heard += os.read(fd, 65536).decode(errors="replace")
        heard = heard[found.end() :]
        return found

    said = []
    try:
        show = 'printf "<w>"; printf "[%s]" "${COMP_WORDS[@]}"; echo "|$COMP_CWORD<done>"'
        os.write(
            fd, f"_f() {{ {show}; COMPREPLY=(); }}; complete -F _f smllm; echo ready\n".encode()
        )
        until("ready")
        for line in lines:
            os.write(fd, line.encode() + b"\t")
            said.append(until(r"<w>((?:\[[^]]*\])+)\|(\d+)<done>").groups())
            os.write(fd, b"\x15")  # ^U: the line cleared
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert said == [
        ("".join(f"[{w}]" for w in bash_words(line)), str(len(bash_words(line)) - 1))
        for line in lines
    ]


def test_another_shell(tmp_path: Path, env: dict[str, str]) -> None:
    ran = smllm(["completions", "tcsh"], tmp_path, env)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "error: no completions for tcsh (shells: bash, zsh, fish)\n"
