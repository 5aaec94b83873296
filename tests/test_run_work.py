"""Tests for the work tools of `smllm run` (smllm.drive.work: read, write, shell) and the
process runner under shell (smllm.api.processes.run_capturing), with real files and real
processes."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import bounded
from hypothesis import given
from hypothesis import strategies as st

from smllm.api.processes import CommandOutput, run_capturing
from smllm.drive.work import READ_LIMIT, WORK_TOOLS, WRITE_LIMIT, Work

SYMLINK = "the work tools follow no symlink, not even one pointing inside the project"
STORE = "`.smllm/state` is smllm's own store: the work tools never touch it"
ABSOLUTE = "`/etc/passwd` is absolute: give it relative to the project folder"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project folder beside an `outside` folder, with symlinks out of it and inside it, a
    FIFO, a binary file, smllm's store and a `.git` folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("print('hi')\n")
    (project / "link_out").symlink_to(outside)
    (project / "file_out").symlink_to(outside / "secret.txt")
    (project / "link_in").symlink_to(project / "src")
    (project / "file_in").symlink_to(project / "src" / "app.py")
    (project / ".smllm" / "state").mkdir(parents=True)
    (project / ".smllm" / "state" / "x").write_text("store\n")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("[core]\n")
    (project / "bin.dat").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x01")
    (project / "nul.txt").write_bytes(b"text\x00more\n")
    os.mkfifo(project / "fifo")
    return Path(os.path.realpath(project))


def tools(root: Path, *allow: str, timeout: float = 10.0) -> Work:
    return Work(str(root), WORK_TOOLS, allow, shell_timeout=timeout)


def within(seconds: float, call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`'s value; fails the test if it hasn't returned after `seconds` (a hang)."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(call(*args)), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds} s")
    return box[0]


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` (not following symlinks): a file's bytes, else its kind."""
    seen: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(folder))
            if path.is_symlink():
                seen[key] = "link:" + os.readlink(path)
            elif path.is_file():
                seen[key] = path.read_bytes() if not path.is_fifo() else "fifo"
            else:
                seen[key] = "fifo" if path.is_fifo() else "dir"
    return seen


def refused(kind: str, message: str) -> tuple[bool, dict[str, str]]:
    return False, {"type": kind, "message": message}


# -- declarations and the admission check --------------------------------------------------


def test_declarations_are_the_granted_tools_in_order(root: Path) -> None:
    work = Work(str(root), ("shell", "read"), ("pytest*", "git diff*"), shell_timeout=30)
    declared = work.declarations()
    assert [tool["name"] for tool in declared] == ["read", "shell"]
    assert declared[0]["parameters"] == {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "relative to the project folder, e.g. src/app.py",
            },
            "offset": {"type": "integer", "minimum": 0},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    assert "Gives at most 256 KiB" in declared[0]["description"]
    assert "no absolute path, no `..`, no symlink" in declared[0]["description"]
    shell = declared[1]["description"]
    assert "matches one of these patterns: `pytest*`, `git diff*`" in shell
    assert "After 30 s the command and everything it started are killed" in shell
    assert "past 16 KiB only its first and last 8 KiB" in shell
    write = tools(root).declarations()[1]
    assert write["parameters"]["required"] == ["path", "content"]
    assert "`content` is at most 1 MiB" in write["description"]
    assert "Never inside `.git`" in write["description"]
    none = Work(str(root), ("shell",)).declarations()[0]["description"]
    assert "No command is allowed in this run (it was given no --allow pattern)" in none


def test_an_unknown_tool_name_is_a_clear_error(root: Path) -> None:
    with pytest.raises(ValueError) as caught:
        Work(str(root), ("read", "exec"))
    assert str(caught.value) == "unknown work tool 'exec': the work tools are read, write and shell"


@pytest.mark.parametrize(
    ("command", "allow", "why"),
    [
        ("pytest -q tests", ("pytest*", "git diff*"), None),
        ("git diff --stat", ("pytest*", "git diff*"), None),
        ("rm -rf x", ("pytest*",), "`rm -rf x` matches no --allow pattern of this run (pytest*)"),
        ("Pytest", ("pytest*",), "`Pytest` matches no --allow pattern of this run (pytest*)"),
        ("pytest", (), "no command is allowed in this run (smllm run got no --allow pattern)"),
        (
            'echo "a',
            ("echo*",),
            "the command can't be split into words (No closing quotation): quote it as sh would",
        ),
        ("  ", ("*",), "the command is empty"),
        ("echo a\0b", ("*",), "the command holds a NUL character"),
        # the pattern sees the words joined back with quoting, not the text as written
        (
            "echo 'a  b'",
            ("echo a  b",),
            "`echo 'a  b'` matches no --allow pattern of this run (echo a  b)",
        ),
        ("echo 'a  b'", ("echo 'a  b'",), None),
    ],
)
def test_shell_admission(root: Path, command: str, allow: tuple[str, ...], why: str | None) -> None:
    work = tools(root, *allow)
    assert work.refusal("shell", {"command": command}) == why
    if why is not None:  # run checks again: refused without running
        assert work.run("shell", {"command": command}) == refused("policy_denied", why)


def test_admission_of_other_acts(root: Path) -> None:
    work = Work(str(root), ("read",))
    assert work.refusal("read", {"path": "/etc/passwd"}) is None  # path checks happen in run
    assert work.refusal("write", {"path": "a", "content": ""}) == (
        "the work tool 'write' is not granted in this run"
    )
    assert (
        work.refusal("shell", {"command": 1}) == "the work tool 'shell' is not granted in this run"
    )
    assert tools(root).refusal("shell", {"command": 1}) == "shell needs a `command` string"
    assert work.run("write", {"path": "w.txt", "content": "x"}) == refused(
        "policy_denied", "the work tool 'write' is not granted in this run"
    )
    assert not (root / "w.txt").exists()
    assert work.run("read", ["src/app.py"]) == refused(
        "invalid_arguments", "read takes a JSON object"
    )


# -- read ------------------------------------------------------------------------------------

PATH_REFUSALS = [
    ("/etc/passwd", "policy_denied", ABSOLUTE),
    ("", "policy_denied", "the path is empty: give one relative to the project"),
    (
        "src/../../outside/secret.txt",
        "policy_denied",
        "`src/../../outside/secret.txt` has a `..` component: paths stay in the project",
    ),
    ("src/app.py\0.txt", "policy_denied", "the path holds a NUL character"),
    ("\ud800", "policy_denied", "the path is not valid Unicode text"),
    (".smllm/state/x", "policy_denied", STORE),
    ("./.smllm//State/x", "policy_denied", STORE),
    ("link_out/secret.txt", "policy_denied", f"`link_out` is a symlink: {SYMLINK}"),
    ("file_out", "policy_denied", f"`file_out` is a symlink: {SYMLINK}"),
    ("link_in/app.py", "policy_denied", f"`link_in` is a symlink: {SYMLINK}"),
    ("file_in", "policy_denied", f"`file_in` is a symlink: {SYMLINK}"),
    ("src", "not_a_file", "`src` is a folder, not a file"),
    ("src/", "not_a_file", "`src/` names a folder, not a file"),
    (".", "not_a_file", "`.` names a folder, not a file"),
    ("src/app.py/x", "not_a_file", "`src/app.py` is not a folder"),
]


@pytest.mark.parametrize(
    ("path", "kind", "message"),
    [
        *PATH_REFUSALS,
        ("nope.txt", "not_found", "no file `nope.txt` in the project"),
        ("nodir/x.txt", "not_found", "no folder `nodir` in the project"),
        ("fifo", "not_a_file", "`fifo` is not a regular file (a FIFO, socket or device)"),
        ("bin.dat", "not_text", "`bin.dat` is binary (not UTF-8 text): not read"),
        ("nul.txt", "not_text", "`nul.txt` is binary (not UTF-8 text): not read"),
    ],
)
def test_read_refusals(root: Path, path: str, kind: str, message: str) -> None:
    # within(): a FIFO opened for reading would wait for a writer forever
    assert within(5, lambda: tools(root).run("read", {"path": path})) == refused(kind, message)


def test_read_gives_the_text(root: Path) -> None:
    whole = {"path": "src/app.py", "content": "print('hi')\n", "bytes": 12}
    assert tools(root).run("read", {"path": "./src//app.py"}) == (
        True,
        {**whole, "truncated": False, "next": None},
    )
    assert tools(root).run("read", {"path": "src/app.py", "offset": 6}) == (
        True,
        {**whole, "content": "'hi')\n", "truncated": False, "next": None},
    )
    assert tools(root).run("read", {"path": "src/app.py", "offset": 10**30}) == (
        True,
        {**whole, "content": "", "truncated": False, "next": None},
    )
    assert tools(root).run("read", {"path": "src/app.py", "offset": -1}) == refused(
        "invalid_arguments", "`offset` must be an integer ≥ 0 (bytes)"
    )


def test_read_cuts_at_256_kib_on_a_character_boundary(root: Path) -> None:
    # "é" is 2 bytes: the one that straddles the limit is left for the next read
    (root / "big.txt").write_text("a" * (READ_LIMIT - 1) + "é" * 10, encoding="utf-8")
    size = READ_LIMIT - 1 + 20
    work = tools(root)
    assert work.run("read", {"path": "big.txt"}) == (
        True,
        {
            "path": "big.txt",
            "content": "a" * (READ_LIMIT - 1),
            "bytes": size,
            "truncated": True,
            "next": READ_LIMIT - 1,
        },
    )
    assert work.run("read", {"path": "big.txt", "offset": READ_LIMIT - 1}) == (
        True,
        {"path": "big.txt", "content": "é" * 10, "bytes": size, "truncated": False, "next": None},
    )
    # an offset inside a character starts at the next one
    ok, value = work.run("read", {"path": "big.txt", "offset": READ_LIMIT})
    assert (ok, value["content"]) == (True, "é" * 9)
    (root / "exact.txt").write_bytes(b"b" * READ_LIMIT)
    ok, value = work.run("read", {"path": "exact.txt"})
    assert (ok, len(value["content"]), value["truncated"]) == (True, READ_LIMIT, False)


# -- write -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind", "message"),
    [
        *PATH_REFUSALS,
        ("fifo", "not_a_file", "`fifo` is not a regular file (a FIFO, socket or device)"),
        (".git/config", "policy_denied", "`.git` is git's own: write never changes it"),
        (
            "sub/.git/hooks/pre-commit",
            "policy_denied",
            "`.git` is git's own: write never changes it",
        ),
    ],
)
def test_write_refusals_change_nothing(root: Path, path: str, kind: str, message: str) -> None:
    before = snapshot(root.parent)
    result = within(5, lambda: tools(root).run("write", {"path": path, "content": "owned\n"}))
    assert result == refused(kind, message)
    assert snapshot(root.parent) == before


def test_write_refuses_content_over_1_mib(root: Path) -> None:
    work = tools(root)
    assert work.run("write", {"path": "big.txt", "content": "é" * (WRITE_LIMIT // 2 + 1)}) == (
        refused(
            "too_large",
            "the content is 1048578 bytes; write takes at most 1 MiB (1048576"
            " bytes): write a smaller file",
        )
    )
    assert not (root / "big.txt").exists()
    assert work.run("write", {"path": "big.txt", "content": "x" * WRITE_LIMIT}) == (
        True,
        {"path": "big.txt", "bytes": WRITE_LIMIT},
    )
    assert work.run("write", {"path": "s.txt", "content": "\ud800"}) == refused(
        "invalid_arguments", "`content` is not valid Unicode text (a lone surrogate)"
    )


def test_write_creates_folders_and_keeps_the_mode(root: Path) -> None:
    work = tools(root)
    assert work.run("write", {"path": "new/deep/f.txt", "content": "hé\n"}) == (
        True,
        {"path": "new/deep/f.txt", "bytes": 4},
    )
    assert (root / "new" / "deep" / "f.txt").read_bytes() == "hé\n".encode()
    os.chmod(root / "src" / "app.py", 0o751)
    assert work.run("write", {"path": "src/app.py", "content": "print(2)\n"}) == (
        True,
        {"path": "src/app.py", "bytes": 9},
    )
    assert (root / "src" / "app.py").read_text() == "print(2)\n"
    assert os.stat(root / "src" / "app.py").st_mode & 0o7777 == 0o751
    assert sorted(os.listdir(root / "src")) == ["app.py"]  # no temporary file left


def test_write_leaves_no_temporary_file_after_an_error(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    result = tools(root).run("write", {"path": "src/app.py", "content": "lost\n"})
    monkeypatch.undo()
    assert result == refused("os_error", "No space left on device")
    assert sorted(os.listdir(root / "src")) == ["app.py"]
    assert (root / "src" / "app.py").read_text() == "print('hi')\n"


WRITER = """
import sys
from smllm.drive.work import Work
work = Work(sys.argv[1], ("write",))
contents = ["a" * 1048576, "b" * 1048576]
n = 0
while True:
    assert work.run("write", {"path": "f.txt", "content": contents[n % 2]})[0]
    n += 1
"""


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_a_stopped_or_killed_write_leaves_the_old_file_or_the_new_one(root: Path) -> None:
    # The writer is frozen (SIGSTOP) at 100 random moments of its loop of writes; each time,
    # what a crash would leave there is the old content or the new one, never a mix or less.
    whole = (b"a" * WRITE_LIMIT, b"b" * WRITE_LIMIT)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)])
    try:
        deadline = time.monotonic() + 20
        while not (root / "f.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = set()
        for _ in range(100):
            os.kill(proc.pid, signal.SIGSTOP)
            while process_state(proc.pid) != "T":
                time.sleep(0.0005)
            content = (root / "f.txt").read_bytes()
            os.kill(proc.pid, signal.SIGCONT)
            assert content in whole, f"a torn file of {len(content)} bytes"
            seen.add(content[:1])
            time.sleep(0.003)
    finally:
        proc.kill()
        proc.wait()
    assert (root / "f.txt").read_bytes() in whole
    assert seen == {b"a", b"b"}  # the writes went on meanwhile


# -- shell -----------------------------------------------------------------------------------


def shell(root: Path, command: str, *allow: str, timeout: float = 10.0) -> tuple[bool, Any]:
    return tools(root, *allow, timeout=timeout).run("shell", {"command": command})


def done(output: str, code: int = 0) -> tuple[bool, dict[str, Any]]:
    return True, {"exit": code, "output": output, "truncated": False, "timedOut": False}


def test_shell_runs_an_allowed_command_in_the_project(root: Path) -> None:
    assert shell(root, "echo hi", "echo *") == done("hi\n")
    assert shell(root, "pwd", "pwd") == done(f"{root}\n")
    script = "echo out; echo err >&2; exit 3"
    assert shell(root, f"sh -c {shlex.quote(script)}", "sh -c *") == done("out\nerr\n", 3)


def test_shell_stdin_is_empty_not_ours(root: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"ours\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        result = shell(root, "cat", "cat")
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert result == done("")


def test_shell_interprets_nothing(root: Path) -> None:
    (root / "x").write_text("keep\n")
    # even with `rm *` allowed: `;` is a word handed to echo, not a second command
    assert shell(root, "echo $HOME; rm x", "echo *", "rm *") == done("$HOME; rm x\n")
    assert shell(root, "echo * > y | cat", "echo *") == done("* > y | cat\n")
    assert (root / "x").read_text() == "keep\n"
    assert not (root / "y").exists()


def alive(pid: int) -> bool:
    """Running, that is: a killed orphan may linger as a zombie until init reaps it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return state.rpartition(")")[2].split()[0] != "Z"


def test_shell_timeout_kills_the_whole_process_group(root: Path) -> None:
    script = "sleep 30 & echo $! > pid; exec sleep 30"
    start = time.monotonic()
    result = shell(root, f"sh -c {shlex.quote(script)}", "sh *", timeout=0.5)
    took = time.monotonic() - start
    assert result == (True, {"exit": None, "output": "", "truncated": False, "timedOut": True})
    assert took < 3
    pid = int((root / "pid").read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the background sleep outlived the timeout")


def test_shell_output_keeps_its_first_and_last_8_kib(root: Path) -> None:
    whole = "".join(f"{n}\n" for n in range(1, 100001)).encode()
    cut = len(whole) - 16384
    assert shell(root, "seq 100000", "seq *") == (
        True,
        {
            "exit": 0,
            "output": whole[:8192].decode()
            + f"\n[… {cut} bytes of output cut here …]\n"
            + whole[-8192:].decode(),
            "truncated": True,
            "timedOut": False,
        },
    )


def test_shell_output_is_cut_on_character_boundaries(root: Path) -> None:
    # 1 + 40000 + 1 bytes: the head's last "é" and the tail's first are split, so both go
    python = shlex.quote(sys.executable)
    command = f"{python} -c \"print('x' + 'é' * 20000)\""
    ok, value = shell(root, command, f"{python} -c *")
    assert (ok, value["truncated"]) == (True, True)
    assert value["output"] == (
        "x" + "é" * 4095 + "\n[… 23620 bytes of output cut here …]\n" + "é" * 4095 + "\n"
    )


def test_shell_command_that_cannot_start(root: Path) -> None:
    assert shell(root, "nosuchcmd-xyz --help", "nosuchcmd*") == refused(
        "not_started", "`nosuchcmd-xyz` could not start: No such file or directory: 'nosuchcmd-xyz'"
    )


# -- processes.run_capturing ------------------------------------------------------------------


def capture(argv: list[str], head: int = 64, tail: int = 64, timeout: float = 10.0) -> Any:
    return run_capturing(argv, cwd="/", env=os.environ, timeout=timeout, head=head, tail=tail)


def test_run_capturing_keeps_head_and_tail_for_any_exit(tmp_path: Path) -> None:
    assert capture(["printf", "0123456789"], head=4, tail=4) == CommandOutput(
        0, b"0123", b"6789", 2
    )
    assert capture(["sh", "-c", "printf 0123456789; exit 5"], head=8, tail=8) == CommandOutput(
        5, b"01234567", b"89", 0
    )
    assert capture(["sh", "-c", "echo out; echo err >&2"]) == CommandOutput(
        0, b"out\nerr\n", b"", 0
    )
    assert capture(["sh", "-c", "kill -9 $$"]) == CommandOutput(-9, b"", b"", 0)
    assert capture(["sleep", "30"], timeout=0.2) == CommandOutput(None, b"", b"", 0)
    assert capture(["/nonexistent/x"]) == "No such file or directory: '/nonexistent/x'"
    assert capture([]) == "empty command"
    # a background grandchild holding the pipe delays the answer only by the short drain
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    result = capture(["sh", "-c", f"echo hi; sleep 30 & echo $! > {pidfile}"])
    took = time.monotonic() - start
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert result == CommandOutput(0, b"hi\n", b"", 0)
    assert took < 1.5
    # output still coming just after a success is read for a moment too (0.2 s)
    late = capture(["sh", "-c", "echo early; (sleep 0.05; echo late) & exit 0"])
    assert late == CommandOutput(0, b"early\nlate\n", b"", 0)


# -- hostile paths ---------------------------------------------------------------------------

PIECES = [
    "..",
    ".",
    "",
    "src",
    "app.py",
    "link_out",
    "file_out",
    "link_in",
    "secret.txt",
    ".smllm",
    "state",
    "x",
    ".git",
    "new",
    "é",
    "\0",
    "fifo",
    "/",
]


def test_random_paths_never_reach_outside_the_project(root: Path) -> None:
    outside = root.parent / "outside"
    before = snapshot(outside)
    store = snapshot(root / ".smllm" / "state")
    git = snapshot(root / ".git")
    work = tools(root)
    prefix = str(root) + os.sep

    @bounded(max_examples=300)
    @given(
        st.lists(st.sampled_from(PIECES) | st.text(max_size=3), min_size=1, max_size=5),
        st.booleans(),
    )
    def check(pieces: list[str], absolute: bool) -> None:
        path = ("/" if absolute else "") + "/".join(pieces)
        # read before and after the write: the second read finds what the write made
        for name, arguments in [
            ("read", {"path": path}),
            ("write", {"path": path, "content": "w"}),
            ("read", {"path": path}),
        ]:
            ok, value = within(5, work.run, name, arguments)
            succeeded[name] += ok
            if ok:
                real = os.path.realpath(root / value["path"])
                assert real.startswith(prefix) and real == str(root / value["path"])
                assert Path(real).read_text() == value.get("content", "w")
        assert snapshot(outside) == before
        assert snapshot(root / ".smllm" / "state") == store
        assert snapshot(root / ".git") == git
        for dirpath, _, filenames in os.walk(root):  # all made is inside, and no temp is left
            assert os.path.realpath(dirpath).startswith(str(root))
            assert not [name for name in filenames if name.endswith(".tmp")]

    succeeded = {"read": 0, "write": 0}
    check()
    assert succeeded["read"] > 0 and succeeded["write"] > 0  # the examples reached files
