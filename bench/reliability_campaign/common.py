"""What every part of the campaign uses: its sizes, the verdict and the report's lines, the
replies smllm may give, running smllm (in this process or as a process), and the world: projects
with XDG folders of their own, over a PostgreSQL server started on first need."""

from __future__ import annotations

import contextlib
import io
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

# this file is bench/reliability_campaign/common.py
BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
TESTS = ROOT / "tests"
for _path in (str(TESTS), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

PG_ENV = "SMLLM_CAMPAIGN_PG"
MACHINE = "dev"
KIND = "issue"
BACKENDS = ("sqlite", "postgres")

Call = dict[str, Any]
Record = dict[str, Any]


class Size(NamedTuple):
    load_procs: int
    load_fires: int
    load_refs: int
    kill_fires_sqlite: int
    kill_fires_pg: int
    pg_stops: int
    fuzz_machines: int
    fuzz_fires: int
    fuzz_samples: int
    hosts_procs: int
    hosts_seconds: float
    hosts_cut_seconds: float


FULL = Size(8, 500, 4, 1000, 300, 5, 10_000, 10_000, 100, 3, 30.0, 20.0)
QUICK = Size(4, 50, 3, 120, 60, 2, 300, 300, 10, 2, 6.0, 12.0)


# -- reporting ----------------------------------------------------------------------------------


class Verdict:
    """The violations found so far, printed as they come."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.fail(what)
        return ok

    def fail(self, what: str) -> None:
        self.violations.append(what)
        if len(self.violations) <= 50:
            print(f"  VIOLATION: {what}", flush=True)

    def extend(self, found: list[str], where: str) -> None:
        for f in found:
            self.fail(f"{where}: {f}")


def heading(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 86 - len(title)), flush=True)


def line(label: str, text: str) -> None:
    print(f"  {label:<34} {text}", flush=True)


def ms_stats(values: list[float]) -> str:
    if not values:
        return "-"
    s = sorted(values)
    p99 = s[min(len(s) - 1, max(0, int(0.99 * len(s) + 0.5) - 1))]
    return f"median {statistics.median(s):.1f} ms, p99 {p99:.1f} ms, max {s[-1]:.1f} ms"


# -- replies ------------------------------------------------------------------------------------

#: engine.md §7.1 and §10: what a refused call may be told (exit 1)
REFUSALS = {
    "lost": re.compile(r"^error: another session changed issue \S+; you are in idle$", re.M),
    "moved": re.compile(r"^error: issue \S+ moved to session \S+; you are in idle$", re.M),
    "status": re.compile(
        r"^error: issue \S+ is (paused|completed|interrupted); you are in idle$", re.M
    ),
    "ref-taken": re.compile(r"^error: another issue of dev already has ref \S+$", re.M),
    "gone": re.compile(r"^error: instance \S+ no longer exists; you are in idle$", re.M),
    "busy": re.compile(r"^error: the store is busy", re.M),
    "not-offered": re.compile(r"^error: \w+ is not offered (in idle|here)", re.M),
}
#: a store that can't be used (exit 2): the outage of faults and two hosts
STORE_ERRORS = {
    "unreachable": re.compile(r"^error: the store at \S+ is unreachable: \S.*$", re.M),
    "unknown-commit": re.compile(
        r"^error: the store at \S+ dropped the connection during a commit, and can't be asked",
        re.M,
    ),
    "dropped": re.compile(
        r"^error: the store at \S+ dropped the connection during a commit, which was not saved",
        re.M,
    ),
    "gave-up": re.compile(r"^error: the store at \S+ gave up: ", re.M),
    "refused": re.compile(r"^error: the store at \S+ refused the connection: ", re.M),
}


def classify(code: int, out: str, err: str) -> str:
    """A reply in a word: `ok`, a REFUSALS or STORE_ERRORS key, or `bad:…` (a violation
    wherever it appears)."""
    text = out + err
    if "Traceback" in text or "internal error" in text:
        return "bad:traceback"
    if code == 0:
        return "ok"
    if code == 1:
        for kind, pattern in REFUSALS.items():
            if pattern.search(text):
                return kind
        return "bad:exit-1-unknown"
    if code == 2:
        for kind, pattern in STORE_ERRORS.items():
            if pattern.search(err):
                return kind
        return "bad:exit-2-unknown"
    return f"bad:exit-{code}"


def first_error(out: str, err: str) -> str:
    for text in (err, out):
        for ln in text.splitlines():
            if ln.startswith("error:"):
                return ln[:200]
    return (err or out).strip().splitlines()[-1][:200] if (err or out).strip() else ""


# -- running smllm --------------------------------------------------------------------------------


def run_inproc(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """The real CLI entry point in this process, output captured."""
    from smllm.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_in = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogateescape")))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's own exits
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = saved_in
    return code, out.getvalue(), err.getvalue()


def run_cli(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float = 60,
    prefix: list[str] | None = None,
) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(
            [*(prefix or []), sys.executable, "-m", "smllm", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"hang: still running after {timeout} s"
    return proc.returncode, proc.stdout, proc.stderr


def enter_argv(key: str, ref: str) -> list[str]:
    return [
        "fire",
        "--session",
        key,
        "enter",
        "--param",
        f"stateMachine={MACHINE}",
        "--param",
        f"issueId={ref}",
    ]


# -- the world: a PostgreSQL server, projects with their own XDG folders --------------------------


class Project(NamedTuple):
    backend: str
    folder: Path
    env: dict[str, str]
    namespace: str
    url: str  # the PostgreSQL URL ('' for SQLite)


class World:
    """A temp folder, a PostgreSQL server started on first need, and projects."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server: Any = None
        self.count = 0

    def pg(self) -> Any:
        if self.server is None:
            from helpers.pgserver import PgServer

            t0 = time.monotonic()
            self.server = PgServer.start(self.root / "pg")
            line(
                "PostgreSQL server",
                f"started in {time.monotonic() - t0:.1f} s, port {self.server.port}",
            )
        return self.server

    def project(self, backend: str, url: str = "", name: str = "") -> Project:
        """A fresh copy of the example project with XDG folders and HOME of its own: a user on a
        machine. On PostgreSQL its config names the server by `url-env`, in a new namespace."""
        from smllm.cli.demo import copy_example

        self.count += 1
        name = name or f"{backend}-{self.count}"
        base = self.root / name
        folder = base / "project"
        folder.mkdir(parents=True)
        copy_example(str(folder))
        env = {k: v for k, v in os.environ.items() if k != "SMLLM_CONFIG"}
        for var in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME"):
            path = base / var.lower()
            path.mkdir()
            env[var] = str(path)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        namespace = ""
        if backend == "postgres":
            url = url or self.pg().url()
            namespace = f"campaign-{os.getpid()}-{self.count}"
            env[PG_ENV] = url
            config = folder / ".smllm" / "config.toml"
            config.write_text(
                config.read_text() + f'\n[state]\nurl-env = "{PG_ENV}"\nnamespace = "{namespace}"\n'
            )
        return Project(backend, folder, env, namespace, url)

    def close(self) -> None:
        if self.server is not None:
            self.server.remove()
            self.server = None


def twin(p: Project, world: World, name: str) -> Project:
    """Another user (XDG folders and HOME of its own) on the same store as P."""
    q = world.project(p.backend, p.url, name)
    if p.backend == "sqlite":
        # the same SQLite store: q's config points at p's state folder
        config = q.folder / ".smllm" / "config.toml"
        config.write_text(
            config.read_text() + f'\n[state]\ndir = "{p.folder / ".smllm" / "state"}"\n'
        )
        return q
    config = q.folder / ".smllm" / "config.toml"
    config.write_text(config.read_text().replace(q.namespace, p.namespace))
    return q._replace(namespace=p.namespace)
