"""A process that fires events through `smllm.api.app.App` until it is killed (tests/test_crash.py).

Usage: SMLLM_TEST_SLOWDB='{…}' python crasher.py SPEC_JSON

SPEC fields: `project` (the folder holding .smllm/), `sessions` (keys), `ref` (the issue),
`seed`, `log` (one JSON line per finished call: session, event, ok), `limit_s` (stop by itself
after this long, in case nobody kills it), and optionally `script`: a list of
[session, event, [[name, value], …]] to fire in order (then the helper exits) instead of the
random loop.

Each call picks a session at random and an event that writes: from idle `enter` (or `resume`
when the session's interrupted slot is set); holding an instance `yield`, `pause`, `unmatched`
or `planned` (PLAN re-entered, its guard command fails). A session that no longer holds what
it thinks it holds gets the §7.1 refusal, which writes the session only. The phase file of
slowdb.py says where the process was when it died.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import slowdb  # tests/helpers, the folder of this script


def main() -> None:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    slowdb.install_from_env()
    slowdb.set_phase("starting")
    os.chdir(spec["project"])
    from smllm.api.app import App

    rng = random.Random(spec["seed"])
    ref: str = spec["ref"]
    sessions: list[str] = spec["sessions"]
    warm = App()
    warm.load(warm.configs_here())  # the compiled-machine cache, so calls start at once
    end = time.monotonic() + float(spec["limit_s"])
    with open(spec["log"], "a", buffering=1) as log:
        slowdb.set_phase("ready")
        for key, event, given in spec.get("script", []):
            slowdb.set_phase(f"engine:{event}")
            result = App().fire(key, event, tuple((n, v) for n, v in given))
            slowdb.set_phase("between-calls")
            log.write(json.dumps({"session": key, "event": event, "ok": result.ok}) + "\n")
        while "script" not in spec and time.monotonic() < end:
            app = App()
            key = rng.choice(sessions)
            s = app.session(key)
            params: tuple[tuple[str, Any], ...] = ()
            if s.holding is None:
                if s.interrupted is not None and rng.random() < 0.5:
                    event = "resume"
                else:
                    event = "enter"
                    params = (("stateMachine", "dev"), ("issueId", ref))
            else:
                event = rng.choice(["yield", "yield", "pause", "unmatched", "planned"])
                if event == "planned":
                    params = (("size", "small"),)
                elif event == "yield" and rng.random() < 0.5:
                    params = (("note", "waiting"),)
            slowdb.set_phase(f"engine:{event}")
            result = app.fire(key, event, params)
            slowdb.set_phase("between-calls")
            log.write(json.dumps({"session": key, "event": event, "ok": result.ok}) + "\n")
            app.user.close()


if __name__ == "__main__":
    main()
