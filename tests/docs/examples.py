"""The docs' examples, run by sybil: one parser for the fenced blocks of a page, and the page's
throw-away project in which its examples run in order.

A page's fenced blocks take these forms (docs/contributing.md says it for writers):

- ```` ```console ````: shell examples. Each line starting with `$ ` is a command (a line
  ending in `\\` continues on the next one); the lines up to the next command are its exact
  output, standard error included, and a last line `[exit N]` when it exits with N ≠ 0. The
  commands run with bash, one after another, in the page's project folder (a `cd` carries over).
  An output line that starts with `$ ` belongs to the output only where the command printed
  such a line itself (`smllm demo` prints the commands it plays); otherwise it starts the next
  command.
- a block with `title="PATH"` in another language than `console` or `text`: a file the page
  writes, at PATH in the project folder, before the examples after it run.
- ```` ```yaml ```` holding a machine (a top-level `states:`): `smllm validate` must pass it (as
  it is written, for a titled one; alone in a scratch folder otherwise). A titled machine whose
  file name starts with `broken` is written but not validated: the page shows what is wrong.
- ```` ```text ````: shown, never run: what needs a real agent client, a GPU or a model.
- ```` ```sh ````, ```` ```bash ````, ```` ```shell ````: not allowed on a page; the test fails,
  naming the block.

Each page gets a fresh root folder: HOME is `ROOT/home`, the project `ROOT/home/project` (with
`git init` run in it), XDG_CONFIG_HOME, XDG_STATE_HOME and XDG_CACHE_HOME their defaults under
HOME, XDG_RUNTIME_DIR `ROOT/run` and TMPDIR `ROOT/tmp`; PATH is this Python's scripts folder and
the system's. tests/docs/placeholders.py says what of an output may differ from the page.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from .placeholders import SHOWN_HOME, Pairing, shown_paths

#: the info line of a fence: the language, then attributes such as title="PATH"
_INFO = re.compile(r"(?P<language>[\w+-]*)(?P<attributes>[^\n]*)$\n", re.MULTILINE)
_TITLE = re.compile(r'title="(?P<title>[^"]*)"')
FORBIDDEN = ("sh", "bash", "shell", "zsh", "shell-session")
#: the longest one command of a page may run
COMMAND_TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, as the parser read it."""

    language: str
    title: str | None
    source: str


@dataclass
class Sandbox:
    """A page's throw-away root, HOME and project folder, and what its run has paired so far."""

    root: Path
    cwd: Path
    pairing: Pairing = field(default_factory=Pairing)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.home / "project"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def env(self) -> dict[str, str]:
        scripts = sysconfig.get_path("scripts")
        path = os.pathsep.join([scripts, os.path.dirname(sys.executable), os.defpath])
        home = str(self.home)
        return {
            "PATH": path,
            "HOME": home,
            "USER": "you",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "COLUMNS": "80",
            "TMPDIR": str(self.tmp),
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "SMLLM_STORE_BROKER": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "You",
            "GIT_AUTHOR_EMAIL": "you@example.com",
            "GIT_COMMITTER_NAME": "You",
            "GIT_COMMITTER_EMAIL": "you@example.com",
        }


def new_sandbox() -> Sandbox:
    root = Path(tempfile.mkdtemp(prefix="smllm-docs-")).resolve()
    sandbox = Sandbox(root=root, cwd=root / "home" / "project")
    for folder in (sandbox.project, sandbox.tmp, root / "run"):
        folder.mkdir(parents=True)
    (root / "run").chmod(0o700)
    subprocess.run(["git", "init", "-q"], cwd=sandbox.project, env=sandbox.env(), check=True)
    return sandbox


# -- the console form --------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One command of a console block and the output the page shows for it."""

    command: str
    output: str  # with the `[exit N]` line, as shown


def _command_at(lines: list[str], i: int) -> tuple[str, int]:
    """The command starting at line I (with its `\\` continuations), and the line after it."""
    command = lines[i][2:].rstrip("\n")
    while command.endswith("\\") and i + 1 < len(lines):
        i += 1
        command = command + "\n" + lines[i].rstrip("\n")
    return command, i + 1


def _output_end(lines: list[str], i: int, actual: list[str]) -> int:
    """Where the output shown from line I ends: at the next `$ ` line, unless the command
    printed a `$ ` line there itself (`smllm demo` prints the commands it plays)."""
    j = i
    while j < len(lines):
        if lines[j].startswith("$ "):
            k = j - i
            if k >= len(actual) or not actual[k].startswith("$ "):
                break
        j += 1
    return j


def run_console(sandbox: Sandbox, source: str) -> list[tuple[Step, str]]:
    """Run each command of a console block in order: each step, with what it printed now as
    the page would show it (placeholders paired)."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[0].startswith("$ "):
        raise ValueError(f"a console block starts with a `$ ` command line, not {lines[0]!r}")
    out: list[tuple[Step, str]] = []
    i = 0
    while i < len(lines):
        command, i = _command_at(lines, i)
        actual = run_step(sandbox, command)
        end = _output_end(lines, i, actual.splitlines(keepends=True))
        step = Step(command, "".join(lines[i:end]))
        i = end
        sandbox.pairing.bind(step.output, actual)
        out.append((step, sandbox.pairing.normalise(actual, step.output)))
    return out


def run_step(sandbox: Sandbox, shown_command: str) -> str:
    """Run one command as the page shows it; its output as the page would show it."""
    where = sandbox.root / ".cwd"
    script = 'cd "$1" || exit 99; eval "$2"; rc=$?; pwd > "$3"; exit $rc'
    command = sandbox.pairing.command(shown_command)
    done = subprocess.run(
        ["bash", "-c", script, "bash", str(sandbox.cwd), command, str(where)],
        env=sandbox.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    if where.exists():
        sandbox.cwd = Path(where.read_text().strip())
    text = done.stdout.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        text += "\n"
    if done.returncode != 0:
        text += f"[exit {done.returncode}]\n"
    return shown_paths(text, str(sandbox.home), str(sandbox.tmp))


def check_console(sandbox: Sandbox, source: str) -> str | None:
    """Run a console block; a unified diff of the first output that differs from the page."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[0].startswith("$ "):
        return f"a console block starts with a `$ ` command line, not {lines[0]!r}"
    for step, actual in run_console(sandbox, source):
        if actual != step.output:
            diff = difflib.unified_diff(
                step.output.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                "shown on the page",
                "printed now",
            )
            return f"$ {step.command}\n" + "".join(diff)
    return None


# -- files and machines --------------------------------------------------------------------------


def is_machine(block: Block) -> bool:
    return block.language == "yaml" and re.search(r"^states:", block.source, re.M) is not None


def validate(sandbox: Sandbox, path: Path, cwd: Path) -> str | None:
    done = subprocess.run(
        [sys.executable, "-m", "smllm", "validate", str(path)],
        cwd=cwd,
        env=sandbox.env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        out = shown_paths(done.stdout + done.stderr, str(sandbox.home), str(sandbox.tmp))
        return f"smllm validate {path.name} exits {done.returncode}:\n{out}"
    return None


def write_file(sandbox: Sandbox, block: Block) -> str | None:
    assert block.title is not None
    title = block.title.replace("~/", SHOWN_HOME + "/")
    if title.startswith(SHOWN_HOME + "/"):
        path = sandbox.home / title[len(SHOWN_HOME) + 1 :]
    else:
        path = sandbox.project / title
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.source)
    if is_machine(block) and not path.name.startswith("broken"):
        return validate(sandbox, path, path.parent)
    return None


def check_machine(sandbox: Sandbox, block: Block) -> str | None:
    scratch = Path(tempfile.mkdtemp(dir=sandbox.tmp))
    machine = scratch / "shown.smllm.yaml"
    machine.write_text(block.source)
    return validate(sandbox, machine, scratch)


# -- sybil: the parser and its evaluator -----------------------------------------------------------


def evaluate(example: Example) -> str | None:
    block: Block = example.parsed
    sandbox: Sandbox = example.namespace["sandbox"]
    if block.language in FORBIDDEN:
        return (
            f"a ```{block.language} block: write shell examples as ```console blocks "
            "($ command, then its exact output), or as ```text when they can't run here"
        )
    if block.language == "console":
        return check_console(sandbox, block.source)
    if block.title is not None and block.language != "text":
        return write_file(sandbox, block)
    if is_machine(block):
        return check_machine(sandbox, block)
    return None


class PageParser:
    """Every fenced block of a page becomes one example, evaluated in page order."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(info_pattern=_INFO)

    def __call__(self, document: Document) -> Any:
        for region in self.lexer(document):
            language = str(region.lexemes["language"])
            title = _TITLE.search(str(region.lexemes["attributes"]))
            region.parsed = Block(
                language, title.group("title") if title else None, str(region.lexemes["source"])
            )
            region.evaluator = evaluate
            yield Region(region.start, region.end, region.parsed, evaluate)


def _setup(namespace: dict[str, Any]) -> None:
    namespace["sandbox"] = new_sandbox()


def _teardown(namespace: dict[str, Any]) -> None:
    shutil.rmtree(namespace["sandbox"].root, ignore_errors=True)


DOCS = Path(__file__).resolve().parents[2] / "docs"

SYBIL = Sybil(parsers=[PageParser()], path=str(DOCS), patterns=["*.md"])


def run_page(page: Path) -> list[str]:
    """Run every example of a page in order, in a fresh sandbox; each failure's message."""
    document = SYBIL.parse(page)
    _setup(document.namespace)
    failures: list[str] = []
    try:
        for example in document.examples():
            try:
                example.evaluate()
            except Exception as error:  # sybil's SybilFailure, or a command that hung
                failures.append(f"{page.name}, line {example.line}:\n{error}")
                break  # what follows ran on a project that isn't the page's any more
    finally:
        _teardown(document.namespace)
    return failures
