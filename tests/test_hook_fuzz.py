"""Hostile standard input through every hook of every harness (cli-and-harnesses.md §5).

Whatever arrives, a hook answers with one of its harness's JSON forms and exit 0, or fails with
exit 1, `error: …` on stderr and nothing on stdout: never a traceback, never a hang, never
half an answer. Most inputs run in process (`run_hook` with its stdin and stdout handed in);
a few dozen run as real processes. bench/hook_bench.py --fuzz runs many more of the same
inputs (helpers/hook_inputs.py: `payloads`, `check`). Then the hostile inputs that matter
most, one by one: garbage, a BOM, 10 MB, past the size limit, a pipe left open, stdin closed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import Ran, bounded
from helpers.hook_inputs import check, payloads, prepare
from helpers.hook_runs import audit, block_text, context, held, hook, payload, stop_process
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from smllm.harness.hook import HARNESSES, HOOKS, run_hook


def run_in_process(name: str, hook: str, stdin: bytes) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    began = time.monotonic()
    try:
        code = run_hook(name, hook, stdin=stdin, stdout=out, stderr=err, environ={})
    except BaseException as exc:  # an exception escaping run_hook is a traceback
        return [f"traceback ({type(exc).__name__})"]
    return check(name, hook, code, out.getvalue(), err.getvalue(), time.monotonic() - began)


def run_process(name: str, hook: str, stdin: bytes, cwd: Path, env: dict[str, str]) -> list[str]:
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "smllm", "harness", "hook", name, hook],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return ["hang"]
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    return check(name, hook, proc.returncode, out, err, time.monotonic() - began)


@pytest.fixture
def prepared(project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    prepare(project, env)
    monkeypatch.chdir(project)
    return project


def test_hostile_input_in_process(prepared: Path) -> None:
    found: Counter[str] = Counter()
    runs = 0

    @bounded(max_examples=300, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(stdin=payloads(str(prepared), huge=False), which=st.integers(0, 11))
    def one(stdin: bytes, which: int) -> None:
        nonlocal runs
        name, hook = HARNESSES[which // 3], HOOKS[which % 3]
        runs += 1
        for wrong in run_in_process(name, hook, stdin):
            found[f"{wrong}: {name} {hook} {stdin[:80]!r}"] += 1

    one()
    assert runs >= 250
    assert not found, "\n".join(found)


def test_hostile_input_in_processes(prepared: Path, env: dict[str, str]) -> None:
    found: list[str] = []
    runs = 0

    @bounded(max_examples=36, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(stdin=payloads(str(prepared)), which=st.integers(0, 11))
    def one(stdin: bytes, which: int) -> None:
        nonlocal runs
        name, hook = HARNESSES[which // 3], HOOKS[which % 3]
        runs += 1
        found.extend(
            f"{wrong}: {name} {hook} {stdin[:80]!r}"
            for wrong in run_process(name, hook, stdin, prepared, env)
        )

    one()
    assert runs >= 30
    assert not found, "\n".join(found)


def test_the_checks_can_fail() -> None:
    """`check` sees each kind of wrong answer (else the fuzz could pass on anything)."""
    assert check("claude", "stop", 0, '{"decision":"block","reason":"<smllm>\\nx"}\n', "", 0) == []
    assert check("claude", "stop", 0, '{"decision":"allow"}\n', "", 0) == ["non-JSON stdout"]
    assert check("claude", "stop", 0, "{}", "", 0) == ["non-JSON stdout"]
    assert check("codex", "stop", 0, "{}\n", "", 6) == ["hang"]
    assert check("copilot", "session-start", 0, '{"additionalContext":"x"}\n', "", 0) == []
    assert check("claude", "session-start", 0, '{"additionalContext":"x"}\n', "", 0) == [
        "non-JSON stdout"
    ]
    assert check("claude", "stop", 1, "{}\n", "error: x\n", 0) == ["stdout on failure"]
    assert check("claude", "stop", 1, "", "Traceback\n", 0) == [
        "traceback",
        "failure without error:",
    ]
    assert check("claude", "stop", 2, "", "error: x\n", 0) == ["exit 2"]
    assert "internal error" in check("claude", "stop", 1, "", "error: internal error: X\n", 0)


# -- hostile input -------------------------------------------------------------------------------


def raw_hook(args: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> Ran:
    proc = subprocess.run(
        [sys.executable, "-m", "smllm", "harness", "hook", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=60,
    )
    return Ran(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"   ",
        b"null",
        b"[]",
        b'"x"',
        b"12",
        b"{",
        b"\xff\xfe{}",
        b"{}}",
        b"[" * 100000,
        b'{"session_id": ["h1"]}',
        b"\x00" * 100,
    ],
    ids=[
        "empty",
        "blank",
        "null",
        "array",
        "string",
        "number",
        "cut",
        "not-utf8",
        "extra",
        "deep",
        "list-id",
        "nul",
    ],
)
def test_bad_input_counts_as_nothing(project: Path, env: dict[str, str], stdin: bytes) -> None:
    for which in ("session-start", "user-prompt-submit", "stop"):
        ran = raw_hook(["claude", which], stdin, project, env)
        assert (ran.code, ran.out, ran.err) == (0, "{}\n", ""), which
    assert not Path(env["XDG_STATE_HOME"]).exists()


def test_a_bom_is_allowed(project: Path, env: dict[str, str]) -> None:
    body = json.dumps(payload("claude", "h1", project)).encode()
    ran = raw_hook(["claude", "session-start"], b"\xef\xbb\xbf" + body, project, env)
    assert "· idle" in context("claude", ran.out)


def test_ten_megabytes_are_answered(project: Path, env: dict[str, str]) -> None:
    key = held("claude", project, env)
    big = payload(
        "claude", "h1", project, stop_hook_active=False, last_assistant_message="x" * (10 << 20)
    )
    ran = hook("claude", "stop", big, project, env)
    assert json.loads(ran.out)["reason"] == block_text(key)
    prompt = payload("claude", "h1", project, prompt="é" * (5 << 20))
    ran = hook("claude", "user-prompt-submit", prompt, project, env)
    assert (ran.code, ran.out) == (0, "{}\n")
    assert audit(key, project, env)[-1] == "prompt"


def test_past_the_limit_is_a_failure(project: Path, env: dict[str, str]) -> None:
    held("claude", project, env)
    body = json.dumps(payload("claude", "h1", project, pad="x" * (33 << 20)))
    ran = hook("claude", "stop", body, project, env)
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == "error: the hook input is larger than 32 MiB\n"


@pytest.mark.parametrize(
    "written", ["", '{"session_id": "h1"', '{"session_id": "h1"}'], ids=["silent", "half", "whole"]
)
def test_a_stdin_that_stays_open_does_not_hang(
    project: Path, env: dict[str, str], written: str
) -> None:
    held("claude", project, env)
    proc = stop_process(project, env, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(written)  # and left open for 10 s
        proc.stdin.flush()
        began = time.monotonic()
        while proc.poll() is None and time.monotonic() - began < 10:
            time.sleep(0.05)
        assert proc.poll() is not None, "the hook still waits for its input after 10 s"
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    if written.endswith("}"):  # a whole object that the client didn't close: it is the input
        assert (proc.returncode, err) == (0, "")
        assert json.loads(out)["decision"] == "block"
    else:
        assert (proc.returncode, out) == (1, "")
        assert err == "error: standard input didn't close within 2 s without a JSON object\n"


def test_closed_stdin_counts_as_nothing(project: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "smllm", "harness", "hook", "claude", "stop"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "{}\n", "")
