"""A racing `smllm` caller for tests/test_concurrency.py: one OS process, one session.

Usage: python racer.py SPEC_JSON

SPEC fields:
- `project`: the folder that holds .smllm/ (the calls run there).
- `dir`: the barrier folder; the racer writes `ready-NAME` there, then waits for `go`.
- `name`: this racer's name (for the ready file and the results).
- `mode`: `inproc` runs the real CLI entry point `smllm.cli.main.main(argv)` in this process
  (fast calls, hard contention); `cli` runs `python -m smllm …` as a child process per call.
- `plan`: what to do, one of
  - `hold`: `rounds` calls on the shared issue `ref`; a session that believes it holds the
    issue fires `yield`, one that believes it is in idle fires `enter` (a takeover);
  - `create`: per round, wait for the barrier `go-ROUND`, then fire
    `enter --param stateMachine=dev --param issueId=REFS[ROUND]`, keyless or from a new session;
  - `script`: wait for `go`, then fire `script` ([[event, [param, …]], …]) from `session`.
- `session`: the session key (`hold`), `keyless`: bool (`create`), `refs`: list (`create`).
- `out`: where to write the results, a JSON list of calls.

Each call is recorded as {name, session, event, ref, code, kind, out, err, t0, t1}, `kind`
being the racer's reading of the reply (see `classify`). The racer never decides what is right:
the test does. With `SMLLM_TEST_SLOWDB` set (inproc mode), slowdb.py slows its transactions.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import slowdb  # tests/helpers, the folder of this script

Call = dict[str, Any]


def wait_for(path: str, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise SystemExit(f"racer: no {path} after {limit} s")
        time.sleep(0.0005)


def run_inproc(argv: list[str]) -> tuple[int, str, str]:
    from smllm.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "smllm", *argv], capture_output=True, text=True, timeout=60
    )
    return proc.returncode, proc.stdout, proc.stderr


def classify(event: str, ref: str, code: int, out: str, err: str) -> str:
    """What the reply says happened, in a word."""
    if code == 0 and event == "yield" and "Yielded: staying in " in out:
        return "yielded"
    if code == 0 and event == "enter" and "Arrived by: enter (new issue)" in out:
        return "created"
    if code == 0 and event == "enter" and "Took over from session sm-" in out:
        return "took-over"
    if code == 0 and event == "enter" and "Arrived by: enter" in out:
        return "continued"
    if code == 1 and f"error: another session changed issue {ref}; you are in idle" in out:
        return "lost"
    if code == 1 and re.search(
        rf"error: issue {re.escape(ref)} moved to session sm-[0-9a-z]{{6}}; you are in idle", out
    ):
        return "moved"
    if code == 1 and f"error: another issue of dev already has ref {ref}" in out:
        return "ref-taken"
    return "other"


def fire(mode: str, session: str | None, event: str, params: list[str]) -> tuple[int, str, str]:
    argv = ["fire"]
    if session is not None:
        argv += ["--session", session]
    argv.append(event)
    for p in params:
        argv += ["--param", p]
    return run_inproc(argv) if mode == "inproc" else run_cli(argv)


def new_session(mode: str) -> str:
    argv = ["session", "new", "--json"]
    code, out, err = run_inproc(argv) if mode == "inproc" else run_cli(argv)
    if code != 0:
        raise SystemExit(f"racer: session new failed ({code}): {err}")
    key: str = json.loads(out)["session"]
    return key


def record(
    name: str, session: str | None, event: str, ref: str, ran: tuple[int, str, str], t0: float
) -> Call:
    code, out, err = ran
    return {
        "name": name,
        "session": session,
        "event": event,
        "ref": ref,
        "code": code,
        "kind": classify(event, ref, code, out, err),
        "out": out,
        "err": err,
        "t0": t0,
        "t1": time.time(),
    }


def hold(spec: dict[str, Any]) -> list[Call]:
    """Race on one issue: yield while holding it, take it over (enter) from idle."""
    name, mode, key, ref = spec["name"], spec["mode"], spec["session"], spec["ref"]
    calls: list[Call] = []
    holding = True  # every session entered the issue in the set-up; most are stale
    enter = ["stateMachine=dev", f"issueId={ref}"]
    open(os.path.join(spec["dir"], f"ready-{name}"), "w").close()
    wait_for(os.path.join(spec["dir"], "go"))
    for _ in range(spec["rounds"]):
        event = "yield" if holding else "enter"
        t0 = time.time()
        ran = fire(mode, key, event, [] if holding else enter)
        calls.append(record(name, key, event, ref, ran, t0))
        # accepted: the session holds the issue; refused (moved, lost): it is in idle
        holding = ran[0] == 0
    return calls


def create(spec: dict[str, Any]) -> list[Call]:
    """Per round: every racer enters a new issue with the same ref at the same moment."""
    name, mode = spec["name"], spec["mode"]
    calls: list[Call] = []
    for i, ref in enumerate(spec["refs"]):
        key = None if spec["keyless"] else new_session(mode)
        open(os.path.join(spec["dir"], f"ready-{i}-{name}"), "w").close()
        wait_for(os.path.join(spec["dir"], f"go-{i}"))
        t0 = time.time()
        ran = fire(mode, key, "enter", ["stateMachine=dev", f"issueId={ref}"])
        call = record(name, key, "enter", ref, ran, t0)
        if key is None and ran[0] == 0:
            # a keyless enter that was accepted made a session: its key is in the header
            found = re.search(r"session (sm-[0-9a-z]{6}) ", ran[1])
            call["session"] = found.group(1) if found else None
        calls.append(call)
    return calls


def script(spec: dict[str, Any]) -> list[Call]:
    """Fire a fixed list of events from one session, all at once with the other racers."""
    name, mode, key, ref = spec["name"], spec["mode"], spec["session"], spec["ref"]
    open(os.path.join(spec["dir"], f"ready-{name}"), "w").close()
    wait_for(os.path.join(spec["dir"], "go"))
    calls = []
    for event, params in spec["script"]:
        t0 = time.time()
        calls.append(record(name, key, event, ref, fire(mode, key, event, params), t0))
    return calls


PLANS = {"hold": hold, "create": create, "script": script}


def main() -> None:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    slowdb.install_from_env()
    os.chdir(spec["project"])
    if spec["mode"] == "inproc":
        # import before the barrier, so the race is between calls and not between imports
        for module in ("smllm.api.app", "smllm.cli.commands", "smllm.cli.main"):
            importlib.import_module(module)
    calls = PLANS[spec["plan"]](spec)
    with open(spec["out"], "w") as f:
        json.dump(calls, f)


if __name__ == "__main__":
    main()
