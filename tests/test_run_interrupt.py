"""Ctrl-C during `smllm run` (issue 22): mid-turn and mid-guard the instance is paused, nothing
is torn, and `smllm run --session KEY` continues it. Each test runs the real CLI in its own
process and sends it SIGINT at a moment it reads from the run's own output (its quiet log, or
its live view on a pseudo-terminal, which shows a turn's start) or from a file the guard or
the shell command writes: never after a blind sleep."""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from conftest import smllm, write_machine
from helpers.scripts import act, write_script
from helpers.slow_machine import slow_machine
from helpers.storerows import StoreRows

#: the most seconds from SIGINT to the process's exit (measured: well under 0.2 s)
PROMPT_EXIT = 2.0
#: a scripted model's pace (seconds per id): turn 1 (a `write`) takes about a second
PACE = 0.01
#: turn 2's OUT text: at PACE, ten seconds of generation, so a SIGINT lands mid-turn
LONG = "x" * 1000
INTERRUPTED = "interrupted: ending the turn and pausing (Ctrl-C again to quit now)\n"
#: the guard of the `slow` machine: passes once `go` exists; else runs a sleep in its own
#: process group, saying the sleep's pid and its own (the group's) in files, and waits
GUARD = "test -e go || { sleep 30 & echo $! > sleep.pid; echo $$ > guard.pid; wait; }"


def script(folder: Path, name: str, *turns: list[dict[str, Any]], pace: float = 0.0) -> str:
    return f"scripted:{write_script(folder, name, *turns, pace=pace)}"


class Ended(NamedTuple):
    code: int
    out: str
    err: str
    seconds: float  # from the (first) SIGINT to the exit


class LiveRun:
    """`smllm run ARGS` in its own process; its stderr read line by line as it comes. With
    TERMINAL, stderr is a pseudo-terminal, so the run shows its live view: a line at the start
    of each turn (`── turn N · where`), which the quiet log doesn't have."""

    def __init__(
        self, args: list[str], project: Path, env: dict[str, str], terminal: bool = False
    ) -> None:
        terminal_fd = None
        if terminal:
            reading, terminal_fd = pty.openpty()
            tty.setraw(terminal_fd)  # no "\r\n" for "\n"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "smllm", "run", *args],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=terminal_fd if terminal_fd is not None else subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        self.sent = 0.0
        if terminal_fd is not None:
            os.close(terminal_fd)
            threading.Thread(target=self._read_terminal, args=(reading,), daemon=True).start()
        else:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def _read_terminal(self, fd: int) -> None:
        """The terminal's lines, each as it ends up on the screen (a redrawn progress line
        gives way to the line written over it)."""
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the run closed its end
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                shown = line.decode().rsplit("\r", 1)[-1].replace("\x1b[K", "")
                self.lines.put(shown + "\n")
        os.close(fd)
        self.lines.put(None)

    def wait_line(self, prefix: str, timeout: float = 30) -> str:
        """The next stderr line starting with PREFIX (the lines before it kept)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                pytest.fail(f"no line {prefix!r} in {timeout} s; stderr: {''.join(self.err)}")
            if line is None:
                pytest.fail(f"the run ended before a line {prefix!r}: {''.join(self.err)}")
            self.err.append(line)
            if line.startswith(prefix):
                return line

    def wait_file(self, path: Path, timeout: float = 30) -> None:
        """Until PATH exists and holds a line (the guard wrote it)."""
        deadline = time.monotonic() + timeout
        while not (path.exists() and path.read_text().endswith("\n")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"{path.name} never came; stderr: {''.join(self.err)}")
            time.sleep(0.01)

    def interrupt(self) -> None:
        if not self.sent:
            self.sent = time.monotonic()
        self.proc.send_signal(signal.SIGINT)

    def end(self, timeout: float = 20) -> Ended:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the run did not exit in {timeout} s after SIGINT")
        seconds = time.monotonic() - self.sent
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        while (line := self.lines.get(timeout=10)) is not None:
            self.err.append(line)
        return Ended(code, out, "".join(self.err), seconds)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def only_key(project: Path, env: dict[str, str]) -> str:
    (session,) = json.loads(smllm(["session", "list", "--json"], project, env).out)["sessions"]
    key: str = session["key"]
    return key


def audit(project: Path, env: dict[str, str], key: str) -> list[tuple[str, Any, Any]]:
    """The session's audit as (kind, event, source)."""
    ran = smllm(["session", "show", key, "--audit", "--json"], project, env)
    assert ran.code == 0, ran.err
    records = json.loads(ran.out)["audit"]
    return [(r["kind"], r.get("event"), r.get("source")) for r in records]


def runs(env: dict[str, str], key: str) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "smllm" / "runs" / key


def transcript(env: dict[str, str], key: str, number: int = 1) -> list[dict[str, Any]]:
    """A run's turns file: every line whole JSON (a torn line fails here)."""
    lines = (runs(env, key) / f"run-{number}.turns.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def history(rows: StoreRows, ref: str) -> tuple[dict[str, Any], list[str]]:
    """The instance of REF and the events of its history."""
    (instance,) = rows.instance_rows(ref=ref)
    return instance, [h["event"] for h in rows.history(instance["id"])]


def gone(pid: int, within: float = 2.0) -> bool:
    """Within WITHIN seconds: no such process, or a zombie nobody reaped yet (it runs
    nothing; a SIGKILL takes a moment to land)."""
    deadline = time.monotonic() + within
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def mid_turn(project: Path, env: dict[str, str], tmp_path: Path, ref: str) -> LiveRun:
    """A run on a terminal whose turn 2 generates for ten seconds, now in turn 2: turn 1 wrote
    PLAN.md, and the live view showed turn 2's start."""
    paced = script(
        tmp_path,
        "paced.json",
        [act("a1", "write", path="PLAN.md", content="The plan.\n")],
        [{"type": "out", "text": LONG}, act("a2", "planned", size="small")],
        pace=PACE,
    )
    args = ["dev", "--ref", ref, "--backend", paced, "--tools", "read,write"]
    run = LiveRun(args, project, env, terminal=True)
    run.wait_line("  ✓ write ")
    run.wait_line("── turn 2 · dev › PLAN")
    return run


def go_on_to_done(project: Path, env: dict[str, str], tmp_path: Path, key: str) -> dict[str, Any]:
    """`smllm run --session KEY` with a model that fires planned and done: the summary."""
    rest = script(
        tmp_path,
        "rest.json",
        [act("b1", "planned", size="small")],
        [act("b2", "done")],
        [{"type": "out", "text": "Done."}],
    )
    ran = smllm(["run", "--session", key, "--backend", rest, "--json"], project, env)
    assert ran.code == 0, ran.err
    summary: dict[str, Any] = json.loads(ran.out)
    assert (summary["stop"], summary["state"], summary["final"]) == ("complete", "DONE", "Done.")
    return summary


def test_ctrl_c_mid_turn_pauses_and_session_continues(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    run = mid_turn(project, env, tmp_path, "GH-7")
    run.interrupt()
    ended = run.end()
    assert ended.code == 130, ended.err
    assert ended.seconds < PROMPT_EXIT  # the ten-second turn stopped at its next id
    key = only_key(project, env)
    turns = transcript(env, key)
    assert len(turns) == 2, (ended, turns[-1])
    first, second = turns
    assert (second["turn"], second["model"], second["note"]) == (2, None, "interrupted")
    assert second["generated"] == []
    fed, generated = len(first["fed"]), len(first["generated"])
    assert ended.err.endswith("── turn 2 · dev › PLAN\n" + INTERRUPTED)
    assert ended.out == (
        f"interrupted: interrupted; paused the instance (dev › PLAN; 1 turns, 0 events, {fed} "
        f"ids fed, {generated} generated)\n"
        f"continue with: smllm run --session {key} and the same --model or --backend\n"
    )
    # the conversation file is whole too: turn 1 both ways, turn 2's runtime side
    (conversation,) = (runs(env, key) / "run-1.smi.jsonl").read_text().splitlines()
    assert len(json.loads(conversation)["transmissions"]) == 3
    record = json.loads((runs(env, key) / "run.json").read_text())
    assert (record["stop"], record["state"], record["ref"]) == ("interrupted", "PLAN", "GH-7")
    # paused: the session idle, the instance listed under Paused; turn 1's write stands
    shown = smllm(["session", "show", key], project, env).out
    assert shown.startswith(f"<smllm>\nsession {key} · idle\n")
    assert "Paused:\n- issue GH-7 (dev) at PLAN\n" in shown
    assert (project / "PLAN.md").read_text() == "The plan.\n"
    rows = StoreRows.of(project, env)
    assert rows.integrity() == "ok"
    instance, events = history(rows, "GH-7")
    assert (instance["status"], instance["state"], events) == ("paused", "PLAN", ["enter", "pause"])
    assert audit(project, env, key) == [
        ("bind", None, None),
        ("event", "enter", "agent"),
        ("event", "pause", "agent"),
    ]
    # --session enters the paused instance again and completes it
    summary = go_on_to_done(project, env, tmp_path, key)
    usr = transcript(env, key, 2)[0]["runtime"][3]
    assert usr["text"].startswith(f"<smllm>\nsession {key} · dev › PLAN (visit 2) · issue GH-7")
    instance, events = history(rows, "GH-7")
    assert (summary["ref"], instance["status"]) == ("GH-7", "completed")
    assert events == ["enter", "pause", "enter", "planned", "done"]
    assert rows.integrity() == "ok"


def test_ctrl_c_mid_guard_kills_the_guard_and_commits_nothing(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    write_machine(project, "slow", slow_machine(30, run=GUARD))
    check = script(tmp_path, "check.json", [act("a1", "checked")])
    run = LiveRun(["slow", "--ref", "T-1", "--backend", check, "--json"], project, env)
    run.wait_file(project / "guard.pid")  # the guard runs, its sleep started
    run.interrupt()
    ended = run.end()
    assert ended.code == 130, ended.err
    assert ended.seconds < PROMPT_EXIT  # not the guard's 30 s
    guard = int((project / "guard.pid").read_text())
    sleep = int((project / "sleep.pid").read_text())
    assert gone(guard) and gone(sleep)  # the guard's whole process group was killed
    summary = json.loads(ended.out)
    assert (summary["stop"], summary["message"], summary["state"]) == (
        "interrupted",
        "interrupted; paused the instance",
        "WORK",
    )
    assert (summary["turns"], summary["events"], summary["acts"]) == (
        1,
        0,
        {"accepted": 0, "refused": 1},
    )
    assert INTERRUPTED in ended.err
    assert "✗ checked {} → failed (interrupted: the run was interrupted while this event's" in (
        ended.err
    )
    (turn,) = transcript(env, summary["session"])
    (said,) = turn["model"]
    assert json.loads(said["text"]) == act("a1", "checked")["json"]
    rows = StoreRows.of(project, env)
    assert rows.integrity() == "ok"
    instance, events = history(rows, "T-1")
    assert (instance["status"], instance["state"], events) == ("paused", "WORK", ["enter", "pause"])
    key = summary["session"]
    assert [a[1] for a in audit(project, env, key)] == [None, "enter", "pause"]
    # --session: the guard passes now, and checked completes the instance
    (project / "go").touch()
    rest = script(tmp_path, "rest.json", [act("b1", "checked")], [{"type": "out", "text": "ok"}])
    ran = smllm(["run", "--session", key, "--backend", rest, "--json"], project, env)
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["stop"] == "complete"
    instance, events = history(rows, "T-1")
    assert (instance["status"], events) == ("completed", ["enter", "pause", "enter", "checked"])


def test_ctrl_c_mid_shell_kills_the_command(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A shell work tool's command ends with the turn, as a guard does (before: the run
    waited for the command, 30 s here, through the first Ctrl-C and the second)."""
    command = "sh -c 'echo $$ > shell.pid; exec sleep 30'"
    shell = script(tmp_path, "shell.json", [act("a1", "shell", command=command)])
    args = ["dev", "--ref", "GH-8", "--backend", shell, "--tools", "shell", "--allow", "sh -c *"]
    run = LiveRun([*args, "--json"], project, env)
    run.wait_file(project / "shell.pid")
    run.interrupt()
    ended = run.end()
    assert ended.code == 130, ended.err
    assert ended.seconds < PROMPT_EXIT
    assert gone(int((project / "shell.pid").read_text()))
    summary = json.loads(ended.out)
    assert (summary["stop"], summary["message"]) == (
        "interrupted",
        "interrupted; paused the instance",
    )
    assert "(interrupted: the run was interrupted while the command ran; it was killed)" in (
        ended.err
    )
    rows = StoreRows.of(project, env)
    assert rows.integrity() == "ok"
    instance, events = history(rows, "GH-8")
    assert (instance["status"], events) == ("paused", ["enter", "pause"])


def test_a_second_ctrl_c_exits_at_once(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    run = mid_turn(project, env, tmp_path, "GH-9")
    run.interrupt()
    run.wait_line(INTERRUPTED)  # the first SIGINT's handler runs
    run.interrupt()
    ended = run.end()
    assert ended.code == 130, ended.err
    assert ended.seconds < PROMPT_EXIT  # the paced generation thread stopped too
    assert "Traceback" not in ended.err
    key = only_key(project, env)
    rows = StoreRows.of(project, env)
    assert rows.integrity() == "ok"
    instance, events = history(rows, "GH-9")
    session = json.loads(smllm(["session", "show", key, "--json"], project, env).out)
    # wherever the second SIGINT landed: before the pause (the instance stays active, held by
    # the session), during it (not committed), or after it (paused, the session idle)
    if ended.err.endswith("error: interrupted again: stopped at once\n"):
        assert ended.out == ""
    else:
        assert ended.out.startswith("interrupted: interrupted; ")
    if instance["status"] == "paused":
        assert events == ["enter", "pause"]
        assert "Paused:\n- issue GH-9 (dev) at PLAN\n" in session["text"]
    else:
        assert (instance["status"], instance["state"], events) == ("active", "PLAN", ["enter"])
        assert session["text"].startswith(f"<smllm>\nsession {key} · dev › PLAN")
    for turn in transcript(env, key):
        assert turn["turn"] in (1, 2)
    go_on_to_done(project, env, tmp_path, key)
    instance, events = history(rows, "GH-9")
    assert instance["status"] == "completed" and events[-2:] == ["planned", "done"]


def test_session_continues_a_paused_run_without_its_record(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A run a second Ctrl-C stopped after its pause saves no run.json: `--session` finds the
    paused instance in the session's audit (its last event, a pause)."""
    pause = script(tmp_path, "pause.json", [act("a1", "pause")])
    ran = smllm(["run", "dev", "--ref", "GH-10", "--backend", pause, "--json"], project, env)
    assert ran.code == 0, ran.err
    key = json.loads(ran.out)["session"]
    (runs(env, key) / "run.json").unlink()
    (project / "PLAN.md").write_text("The plan.\n")
    go_on_to_done(project, env, tmp_path, key)
    _, events = history(StoreRows.of(project, env), "GH-10")
    assert events == ["enter", "pause", "enter", "planned", "done"]
    # once the session's last event is no pause, there is nothing to continue
    (runs(env, key) / "run.json").unlink()
    rest = script(tmp_path, "more.json", [act("c1", "yield")])
    again = smllm(["run", "--session", key, "--backend", rest], project, env)
    assert (again.code, again.out) == (2, "")
    assert again.err == (
        f"error: session {key} is idle with no paused run to continue: name a MACHINE (and "
        "--ref) to enter\n"
    )


def test_session_continues_a_pause_cut_off_before_its_session_write(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A second Ctrl-C during the pause, between its instance write and its session write:
    the instance is paused, the session still names it (no audit record, no run.json says
    paused). `--session` enters it again: the engine's first call only returns the session
    to idle (engine.md §7.1), so the run enters twice."""
    planned = script(tmp_path, "planned.json", [act("a1", "planned", size="small")])
    args = ["dev", "--ref", "GH-12", "--backend", planned, "--max-turns", "1", "--json"]
    ran = smllm(["run", *args], project, env)
    assert ran.code == 1 and json.loads(ran.out)["stop"] == "max-turns", ran.err
    key = json.loads(ran.out)["session"]
    rows = StoreRows.of(project, env)
    (instance,) = rows.instance_rows(ref="GH-12")
    rows.set(instance["id"], "data", json.dumps({**instance, "status": "paused", "holder": None}))
    rows.set(instance["id"], "status", "paused")
    (project / "PLAN.md").write_text("The plan.\n")
    go_on_to_done(project, env, tmp_path, key)
    instance, events = history(rows, "GH-12")
    assert (instance["status"], events) == (
        "completed",
        ["enter", "planned", "enter", "planned", "done"],
    )
    assert rows.integrity() == "ok"


def test_ctrl_c_after_a_yield_keeps_the_instance_yielded(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A run going on from a yield, interrupted mid-turn: the instance stays yielded and held
    (a yield hands the turn to the user; pausing it would take the instance from the
    session), and `--session` goes on from there."""
    yielding = script(tmp_path, "yield.json", [act("a1", "yield")])
    ran = smllm(["run", "dev", "--ref", "GH-11", "--backend", yielding, "--json"], project, env)
    assert ran.code == 0 and json.loads(ran.out)["stop"] == "yield", ran.err
    key = json.loads(ran.out)["session"]
    slow = script(
        tmp_path,
        "slow.json",
        [act("b1", "write", path="PLAN.md", content="The plan.\n")],  # a work tool: no event
        [{"type": "out", "text": LONG}, act("b2", "pause")],
        pace=PACE,
    )
    args = ["--session", key, "--backend", slow, "--tools", "write", "--json"]
    run = LiveRun(args, project, env, terminal=True)
    run.wait_line("── turn 2 · dev › PLAN")
    run.interrupt()
    ended = run.end()
    assert ended.code == 130, ended.err
    assert ended.seconds < PROMPT_EXIT
    summary = json.loads(ended.out)
    assert (summary["stop"], summary["message"], summary["state"]) == (
        "interrupted",
        "interrupted; the instance had yielded and stays so",
        "PLAN",
    )
    rows = StoreRows.of(project, env)
    assert rows.integrity() == "ok"
    instance, events = history(rows, "GH-11")
    assert (instance["status"], events) == ("active", ["enter", "yield"])
    assert instance["holder"] == key
    shown = smllm(["session", "show", key, "--json"], project, env)
    assert json.loads(shown.out)["session"]["yielded"] is True
    go_on_to_done(project, env, tmp_path, key)
    instance, events = history(rows, "GH-11")
    assert events == ["enter", "yield", "planned", "done"]
