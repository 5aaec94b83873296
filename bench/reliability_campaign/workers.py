"""The worker processes that fire: one process, one session, firing in a loop, each returned
call a JSON line of its log; and starting, awaiting and reading them."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import BENCH, PG_ENV, Call, Verdict, classify, enter_argv, first_error, run_inproc

#: a worker is this entry script run as `campaign.py _worker SPEC` (it puts bench/ on sys.path)
SCRIPT = BENCH / "campaign.py"


def worker(spec: dict[str, Any]) -> None:
    """`campaign.py _worker SPEC`: fire `rounds` calls (or for `seconds`) on the shared refs
    through the real CLI entry point in this process, one JSON line per returned call in `log`.

    From idle it enters a random ref (a takeover when another session holds it); holding one it
    yields (or pauses, one call in five). An accepted call leaves it holding the ref (or not,
    after pause); a refusal puts it in idle (§7.1); a store error (exit 2) leaves it unsure,
    so it next yields on that ref, which settles it."""
    import importlib

    os.chdir(spec["project"])
    modules = ["smllm.api.app", "smllm.cli.commands", "smllm.cli.main", "smllm.engine.fire"]
    if os.environ.get(PG_ENV):
        modules.append("psycopg")  # so that kills land in fires, not in this import
    for module in modules:
        importlib.import_module(module)
    rng = random.Random(spec["seed"])
    key = spec.get("session")
    if not key:
        code, out, err = run_inproc(["session", "new", "--json"])
        if code != 0:
            raise SystemExit(f"worker: session new failed ({code}): {out}{err}")
        key = json.loads(out)["session"]
    refs: list[str] = spec["refs"]
    log = open(spec["log"], "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    log.write(json.dumps({"ready": key}) + "\n")
    if spec.get("go"):
        end = time.monotonic() + 120
        while not os.path.exists(spec["go"]):
            if time.monotonic() > end:
                raise SystemExit("worker: no go")
            time.sleep(0.001)
    holding: str | None = spec.get("holding")
    unsure = False
    rounds = spec.get("rounds") or 10**9
    stop_at = time.monotonic() + float(spec.get("seconds") or 10**9)
    pause_share = float(spec.get("pause", 0.2))
    stop_file = spec.get("stop")
    for _ in range(rounds):
        if time.monotonic() > stop_at or (stop_file and os.path.exists(stop_file)):
            break
        if holding is not None:
            ref = holding
            event = "yield" if unsure or rng.random() >= pause_share else "pause"
            argv = ["fire", "--session", key, event]
        else:
            ref = rng.choice(refs)
            event = "enter"
            argv = enter_argv(key, ref)
        log.write(json.dumps({"intent": [key, event, ref]}) + "\n")
        t0 = time.time()
        code, out, err = run_inproc(argv)
        t1 = time.time()
        kind = classify(code, out, err)
        call = {"s": key, "e": event, "r": ref, "c": code, "k": kind, "t0": t0, "t1": t1}
        if kind != "ok":
            call["m"] = first_error(out, err)
        log.write(json.dumps(call) + "\n")
        if code == 2:
            holding, unsure = ref, True  # its commit may or may not have landed
        elif code == 0:
            holding, unsure = (None if event == "pause" else ref), False
        else:
            holding, unsure = None, False
        if spec.get("gap_s"):
            time.sleep(rng.uniform(0, float(spec["gap_s"])))


def read_log(path: Path) -> tuple[list[Call], list[str]]:
    """The calls of a worker's log, and its session keys. A call announced but never finished
    (the process was killed during it) is there as kind `killed`."""
    calls: list[Call] = []
    keys: list[str] = []
    if not path.exists():
        return calls, keys
    pending: list[str] | None = None
    for ln in path.read_text().splitlines():
        try:
            d = json.loads(ln)
        except ValueError:
            continue  # a line the kill cut short
        if "ready" in d:
            keys.append(d["ready"])
        elif "intent" in d:
            pending = d["intent"]
        else:
            calls.append(d)
            pending = None
    if pending is not None:
        key, event, ref = pending
        calls.append({"s": key, "e": event, "r": ref, "c": -9, "k": "killed"})
    return calls, keys


def spawn(
    spec: dict[str, Any], env: dict[str, str], prefix: list[str] | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(prefix or []),
            sys.executable,
            str(SCRIPT),
            "_worker",
            json.dumps(spec),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_ready(logs: list[Path], procs: list[subprocess.Popen[bytes]], limit: float = 120) -> None:
    end = time.monotonic() + limit
    while not all(read_log(p)[1] for p in logs):
        for proc in procs:
            if proc.poll() not in (None, 0):
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"a worker died before it was ready: {err[-2000:]}")
        if time.monotonic() > end:
            raise RuntimeError("workers never got ready")
        time.sleep(0.01)


def finish(procs: list[subprocess.Popen[bytes]], v: Verdict, limit: float = 600) -> None:
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            v.fail("a worker hung")
            continue
        if proc.returncode != 0:
            v.fail(f"a worker exited {proc.returncode}: {err.decode()[-1500:]}")
