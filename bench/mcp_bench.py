"""`smllm mcp` speed report, and a long fuzz run (cli-and-harnesses.md §4).

    python bench/mcp_bench.py                # start-up and tools/call (about a minute)
    python bench/mcp_bench.py --quick        # fewer rounds
    python bench/mcp_bench.py --fuzz [N]     # N (default 10000) hypothesis-made inputs thrown
                                             # at one running server: tracebacks, hangs and
                                             # non-JSON lines counted
    python bench/mcp_bench.py --python PY    # time the server under PY instead of a regular
                                             # install made here

A report, not a gate: it prints medians and a PASS/MISS line per target, and exits 0 whatever
it measured (non-zero only if it crashes).

Targets:
  1. `initialize` answered <= 1 s after the process starts (`python -m smllm mcp`, judged on a
     regular install: a wheel of this tree installed with its dependencies, not editable, .pyc
     written, in a venv of its own kept under --venv-cache, keyed on the sources' hash); shown
     as ms and as a ratio to `python -c pass` run the same way; the first `tools/list` answer
     (which waits for the SDK's import) is shown too;
  2. a `tools/call` round trip inside a running server, with 100 paused and 10,000 completed
     instances in the store: median <= 2 ms, a view (`{ session }`) and a fire (`yield`)
     measured separately.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import venv
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from fill import populate, store_counts
from report import Stats, _bin, _digest, _package_files, cached_bytecode_env, heading, verdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b"}},
}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def regular_install(cache: str) -> tuple[str | None, str]:
    """A venv holding a wheel of this tree and its dependencies (the index's), .pyc written;
    reused while the sources are unchanged. (python or None, how it was made)."""
    folder = os.path.join(cache, f"mcp-venv-{_digest(REPO)}")
    python = _bin(folder, "python")
    if os.path.exists(os.path.join(folder, "bench-ready")):
        return python, f"reused {folder}"
    try:
        venv.create(folder, with_pip=False, symlinks=os.name != "nt")
        with tempfile.TemporaryDirectory(prefix="mcp-bench-build-") as tmp:
            tree = os.path.join(tmp, "tree")
            for path in _package_files(REPO):
                dest = os.path.join(tree, os.path.relpath(path, REPO))
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(path, "rb") as src, open(dest, "wb") as out:
                    out.write(src.read())
            pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
            subprocess.run([*pip, "--python", python, "install", tree], check=True, timeout=900)
        subprocess.run([python, "-m", "compileall", "-q", folder], check=False, timeout=600)
        with open(os.path.join(folder, "bench-ready"), "w") as f:
            f.write("ok\n")
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"no regular install: {exc}"
    return python, f"made {folder}"


def start_times(python: str, cwd: str, env: dict[str, str], n: int) -> dict[str, list[float]]:
    """ms from start to the `initialize` answer, to the `tools/list` answer after it, to the
    first `tools/call` answer after that (it waits for the SDK's import), and of the whole
    `python -c pass`, interleaved."""
    out: dict[str, list[float]] = {
        "initialize": [],
        "tools/list": [],
        "first tools/call": [],
        "python -c pass": [],
    }
    for i in range(n + 2):  # two warm-up rounds: page cache, .pyc, machine cache
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "pass"], cwd=cwd, env=env, check=True)
        t_pass = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [python, "-m", "smllm", "mcp"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line(INIT))
        proc.stdin.flush()
        answer = proc.stdout.readline()
        t_init = (time.perf_counter() - t0) * 1000
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        proc.stdin.flush()
        listed = proc.stdout.readline()
        t_list = (time.perf_counter() - t0) * 1000
        call = {"name": "smllm", "arguments": {}}  # a call error: no store is opened
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        proc.stdin.flush()
        called = proc.stdout.readline()
        t_call = (time.perf_counter() - t0) * 1000
        proc.stdin.close()
        proc.wait(30)
        assert b'"protocolVersion"' in answer and b'"tools"' in listed, (answer, listed)
        assert b'"isError":true' in called, called
        if i >= 2:
            out["initialize"].append(t_init)
            out["tools/list"].append(t_list)
            out["first tools/call"].append(t_call)
            out["python -c pass"].append(t_pass)
    return out


class Server:
    """A running `smllm mcp`, spoken to without threads (one request, one answer)."""

    def __init__(self, python: str, cwd: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "smllm", "mcp"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.id = 0
        self.ask(INIT)

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line(message))
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def call(self, **arguments: Any) -> tuple[str, bool]:
        self.id += 1
        message = {"name": "smllm", "arguments": arguments}
        answer = self.ask(
            {"jsonrpc": "2.0", "id": self.id, "method": "tools/call", "params": message}
        )
        result = answer["result"]
        return result["content"][0]["text"], result["isError"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def call_times(python: str, root: str, env: dict[str, str], n: int) -> dict[str, list[float]]:
    from smllm.cli.demo import copy_example

    project = os.path.join(root, "full")
    os.makedirs(project)
    copy_example(project)
    store = populate(project, 100, 10_000, start=1)
    print(f"  store: {store_counts(store)}")
    server = Server(python, project, env)
    text, error = server.call(event="enter", params={"stateMachine": "dev", "issueId": "GH-0"})
    assert not error, text
    key = text.split("\n")[1].split()[1]
    out: dict[str, list[float]] = {"view { session }": [], "fire yield": []}
    calls = {
        "view { session }": {"session": key},
        "fire yield": {"session": key, "event": "yield"},
    }
    for arguments in calls.values():  # warm-up
        for _ in range(20):
            server.call(**arguments)
    block = max(10, n // 10)
    for _ in range(0, n, block):
        for name, arguments in calls.items():
            for _ in range(block):
                t0 = time.perf_counter_ns()
                text, error = server.call(**arguments)
                out[name].append((time.perf_counter_ns() - t0) / 1e6)
                assert not error, text
    server.close()
    return out


def fuzz(python: str, root: str, env: dict[str, str], n: int) -> None:
    from helpers.mcp_client import Fuzzer, McpProcess, fuzz_lines
    from hypothesis import HealthCheck, Phase, given, settings

    from smllm.cli.demo import copy_example

    project = os.path.join(root, "fuzz")
    os.makedirs(project)
    copy_example(project)
    with McpProcess(project, env, python=python) as server:
        fuzzer = Fuzzer(server)
        t0 = time.perf_counter()

        @settings(
            max_examples=n,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(fuzz_lines())
        def one(lines: list[bytes]) -> None:
            if server.proc.poll() is None:
                fuzzer.run(lines)

        one()
        alive = server.proc.poll() is None
        code = server.close() if alive else server.proc.returncode
        seconds = time.perf_counter() - t0
    heading(f"fuzz: {n} inputs in {seconds:.0f} s")
    print(f"  ids checked (the lines' own, made unique, and a ping after each): {fuzzer.count}")
    print(f"  tracebacks on stderr: {fuzzer.tracebacks}")
    print(f"  hangs (an answer missing, or the server gone): {fuzzer.hangs}")
    print(f"  non-JSON lines on stdout: {fuzzer.not_json}")
    print(f"  answers to no request, or a second answer: {fuzzer.wrong_answers}")
    print(f"  alive at the end: {alive}; exit code at end of input: {code}")
    for problem in fuzzer.problems[:5]:
        print(f"  - {problem[:400]}")
    ok = alive and code == 0 and not fuzzer.problems
    print(f"  {verdict(ok)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fuzz", type=int, nargs="?", const=10_000, default=None)
    ap.add_argument("--python", help="the interpreter to time (default: a regular install)")
    ap.add_argument(
        "--venv-cache",
        default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                             "smllm-bench"),
    )  # fmt: skip
    args = ap.parse_args(argv)
    from smllm.cli.demo import throwaway

    with throwaway("smllm-mcp-bench-") as (root, env):
        env = cached_bytecode_env(env, root)
        if args.python:
            python, how = args.python, "given by --python"
        else:
            os.makedirs(args.venv_cache, exist_ok=True)
            python, how = regular_install(args.venv_cache)
            if python is None:
                python, how = sys.executable, f"{how}; the dev venv's python instead"
        print(f"python: {python} ({how})")
        if args.fuzz is not None:
            fuzz(python, root, env, args.fuzz)
            return 0
        from smllm.cli.demo import copy_example

        project = os.path.join(root, "start")
        os.makedirs(project)
        copy_example(project)
        starts = start_times(python, project, env, 7 if args.quick else 21)
        heading("start-up: from the process's start (python -m smllm mcp)")
        base = Stats.of(starts["python -c pass"]).median
        for name, values in starts.items():
            stats = Stats.of(values)
            print(f"  {name:<16} {stats.line(digits=1)}   {stats.median / base:6.1f}x pass")
        init_ok = Stats.of(starts["initialize"]).median <= 1000
        list_ok = Stats.of(starts["tools/list"]).median <= 1000
        print(f"  target: initialize answered <= 1 s: {verdict(init_ok)}")
        print(f"  target: tools/list answered <= 1 s: {verdict(list_ok)}")
        heading("tools/call round trip, 100 paused + 10,000 completed instances")
        times = call_times(python, root, env, 200 if args.quick else 1000)
        for name, values in times.items():
            stats = Stats.of(values)
            print(f"  {name:<18} {stats.line()}   {verdict(stats.median <= 2.0)} (<= 2 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
