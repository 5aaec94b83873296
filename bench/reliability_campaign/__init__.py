"""The reliability campaign of issue 11: load, faults, hostile input and two hosts, over the
SQLite and the PostgreSQL instance stores (engine.md §7.1, §10).

    python bench/campaign.py load        # 8 processes x 500 fires on shared instances
    python bench/campaign.py faults      # kill -9 in 1,000 (SQLite) / 300 (PostgreSQL) fires;
                                         # the server stopped with -m immediate and restarted
    python bench/campaign.py fuzz        # 10,000 machine files, 10,000 fire argument sets
    python bench/campaign.py twohosts    # two network namespaces, a veth pair, a link cut
    python bench/campaign.py all         # every one of them
    ... --quick                          # the CI size (all of them together in ~3 minutes)

A gate, not a report: each subcommand prints its figures per backend and exits 1 when an
invariant is violated (each violation is printed, `VIOLATION: …`), 0 otherwise.

The invariants:
- every instance's history is versions 1..V without a gap, V being its version, and the
  instance row agrees with its last history record (state, status), no record without its
  instance, no holder on a paused or completed instance;
- 0 torn records: every row's JSON parses and agrees with the columns beside it (instances),
  history records and sessions parse;
- the history equals the accepted calls: per session, the (ref, event) of its records in time
  order are exactly its calls that exited 0 (load, two hosts); under faults, the calls that
  returned 0 are all there, in order, and the only extra records are those of calls that were
  killed, or whose commit's outcome smllm said it couldn't know;
- every refused call got an `error:` of engine.md §7.1 or §10 (`another session changed …`, `…
  moved to session …`, `another issue of dev already has ref …`, `the store is busy`), exit 1;
  under load never exit 2; under faults exit 2 only with a store error (`the store at HOST is
  unreachable: …`, `… dropped the connection during a commit …`); never a traceback or an
  internal error;
- hostile input: no traceback, no internal error, no hang; every failure is a finding of the
  machine file or an `error:` line.

The PostgreSQL server is a throw-away cluster (tests/helpers/pgserver.py) started here and
removed at the end; the two-host run needs root (`ip netns`), and removes its namespaces and
veth pair whatever happens. Stdlib, smllm, psycopg and hypothesis.

Run it as bench/campaign.py (an entry script; workers are that script too), or from bench/ as
`python -m reliability_campaign …`. The package: common.py (sizes, the verdict, the report's
lines, the replies smllm may give, running smllm, the world of projects), store_checks.py (a
store read from its tables, the invariants checked on it), workers.py (the firing processes),
and a module a subcommand: load.py, faults.py, fuzz.py, twohosts.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .common import FULL, QUICK, Size, Verdict, World, classify, heading
from .faults import faults
from .fuzz import fuzz
from .load import load
from .store_checks import Snapshot, _snapshot, check_calls, check_histories
from .twohosts import twohosts
from .workers import worker

#: what tests/test_campaign.py uses, beside COMMANDS and main
__all__ = [
    "COMMANDS",
    "QUICK",
    "Snapshot",
    "Verdict",
    "World",
    "_snapshot",
    "check_calls",
    "check_histories",
    "classify",
    "load",
    "main",
]

COMMANDS: dict[str, Callable[[World, Size, Verdict], None]] = {
    "load": load,
    "faults": faults,
    "fuzz": fuzz,
    "twohosts": twohosts,
}


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["_worker"]:
        worker(json.loads(args_in[1]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=[*COMMANDS, "all"])
    ap.add_argument("--quick", action="store_true", help="the CI size")
    ap.add_argument("--dir", default=None, help="make the temp folder here (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    ap.add_argument("--fuzz-cases", type=int, default=None, help="fuzz cases of each kind")
    args = ap.parse_args(args_in)
    size = QUICK if args.quick else FULL
    if args.fuzz_cases:
        size = size._replace(fuzz_machines=args.fuzz_cases, fuzz_fires=args.fuzz_cases)
    began = time.monotonic()
    print(f"smllm reliability campaign: {args.command}" + (" (--quick)" if args.quick else ""))
    root = Path(tempfile.mkdtemp(prefix="smllm-campaign-", dir=args.dir))
    world = World(root)
    v = Verdict()
    try:
        for name in COMMANDS if args.command == "all" else [args.command]:
            COMMANDS[name](world, size, v)
    finally:
        world.close()
        if args.keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)
    heading("verdict")
    took = time.monotonic() - began
    if v.violations:
        print(f"  FAIL: {len(v.violations)} violated invariants ({took:.0f} s)")
        return 1
    print(f"  PASS: every invariant held ({took:.0f} s)")
    return 0
