"""Shared fixtures: an isolated smllm environment per test, and running the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import Phase, settings

ROOT = Path(__file__).resolve().parent
MACHINES = ROOT / "machines"

ALL = ["always", "fallback", "final", "reenter", "visits", "fix"]


#: The shared Hypothesis profile of the property and fuzz tests (issue 12 §1.4): a failure
#: reports in seconds, with the example as generated and the blob that reproduces it. Shrinking
#: (up to 300 s inside Hypothesis, each step a whole scenario here) and explaining are off;
#: SMLLM_SHRINK=1 turns shrinking back on to get a small example of a known failure. No
#: deadline: the fuzz tests bound each case themselves, by wall clock (fuzz_property.time_limit,
#: `smllm` timeouts), where a slow CI machine can't make them flaky.
BOUNDED = "smllm-bounded"
settings.register_profile(
    BOUNDED,
    phases=(
        Phase.explicit,
        Phase.reuse,
        Phase.generate,
        *((Phase.shrink,) if os.environ.get("SMLLM_SHRINK") else ()),
    ),
    deadline=None,
    database=None,
    print_blob=True,
)


def bounded(**changes: Any) -> settings:
    """The BOUNDED profile with CHANGES (max_examples, derandomize, health checks, …)."""
    return settings(settings.get_profile(BOUNDED), **changes)


class Ran(NamedTuple):
    code: int
    out: str
    err: str


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """XDG folders inside the test's tmp dir, so no test touches the user's state."""
    values = {
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "HOME": str(tmp_path / "home"),
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("SMLLM_CONFIG", raising=False)
    yield {**os.environ, **values}


@pytest.fixture
def project(tmp_path: Path, env: dict[str, str]) -> Path:
    """A fresh project holding the seed's example machine in .smllm/."""
    from smllm.cli.demo import copy_example

    folder = tmp_path / "project"
    folder.mkdir()
    copy_example(str(folder))
    return folder


def smllm(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    stdin: str | None = None,
    timeout: float = 60,
) -> Ran:
    """Run the real `smllm` in a new process; one still running after `timeout` seconds
    fails the test as a hang."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "smllm", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"smllm {' '.join(args)} hung (still running after {timeout} s)")
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def write_machine(folder: Path, name: str, text: str) -> Path:
    """Write .smllm/NAME.smllm.yaml and list it in .smllm/config.toml."""
    smllm_dir = folder / ".smllm"
    smllm_dir.mkdir(parents=True, exist_ok=True)
    path = smllm_dir / f"{name}.smllm.yaml"
    path.write_text(text)
    config = smllm_dir / "config.toml"
    files = []
    state = ""
    if config.exists():
        import tomllib

        text = config.read_text()
        files = tomllib.loads(text).get("machines", {}).get("files", [])
        if "\n[state]" in text:  # a store chosen by the test (store_project) stays chosen
            state = text[text.index("\n[state]") :]
    if path.name not in files:
        files.append(path.name)
    config.write_text("[machines]\nfiles = [" + ", ".join(f'"{f}"' for f in files) + "]\n" + state)
    return path


@pytest.fixture
def every_machine(project: Path) -> Path:
    """The example project, with every fixture machine listed too."""
    smllm_dir = project / ".smllm"
    for name in ALL[:-1]:
        shutil.copy(MACHINES / f"{name}.smllm.yaml", smllm_dir)
    shutil.copytree(MACHINES / "fix", smllm_dir, dirs_exist_ok=True)
    files = ", ".join(f'"{n}.smllm.yaml"' for n in ["dev", *ALL])
    (smllm_dir / "config.toml").write_text(f"[machines]\nfiles = [{files}]\n")
    return project


def enter_args(key: str, ref: str) -> list[str]:
    """`smllm fire --session KEY enter` for issue REF of the example machine."""
    return [
        "fire",
        "--session",
        key,
        "enter",
        "--param",
        "stateMachine=dev",
        "--param",
        f"issueId={ref}",
    ]


def require_tool(name: str, install: str) -> str:
    """The path of the outside tool NAME; without it the test fails (never skips), saying how
    to get it (INSTALL). scripts/test installs every tool the tests need."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"needs `{name}`, not found on PATH: {install} (scripts/test installs it)")
    return path


# -- the store backends: embedded SQLite, and a real PostgreSQL server ---------------------------

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One throw-away PostgreSQL cluster for the whole run (tests/helpers/pgserver.py). Without
    the server binaries the tests that need it fail, saying what to install."""
    import tempfile

    from helpers.pgserver import INSTALL, PgServer

    shared = os.environ.get("SMLLM_TEST_PG_SERVER")
    if shared:  # scripts/mutation's one cluster for a whole run ("ROOT:PORT"), kept after it
        root, _, port = shared.rpartition(":")
        yield PgServer(Path(root), int(port))
        return
    try:
        server = PgServer.start(Path(tempfile.mkdtemp(prefix="smllm-pg-")))
    except (RuntimeError, OSError) as exc:
        pytest.fail(f"no PostgreSQL server could be started ({exc}); needs the {INSTALL}")
    yield server
    server.remove()


@pytest.fixture
def pg_url(pg_server: Any, env: dict[str, str]) -> str:
    """The test server's URL (with its password); each test gets a namespace of its own
    (pg_namespace), so tests share the database and never see each other's instances."""
    url: str = pg_server.url()
    return url


@pytest.fixture
def pg_namespace(request: pytest.FixtureRequest) -> str:
    import hashlib

    name = request.node.nodeid
    if os.environ.get("SMLLM_TEST_PG_SERVER"):  # a shared cluster: each run of a test anew
        import uuid

        name += uuid.uuid4().hex
    return "t-" + hashlib.sha256(name.encode()).hexdigest()[:16]


def use_postgres(
    project: Path, url: str, namespace: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point PROJECT's config at the PostgreSQL store: `url-env = "SMLLM_TEST_PG"` (so the
    password is in no file), set in ENV and in this process."""
    env["SMLLM_TEST_PG"] = url
    monkeypatch.setenv("SMLLM_TEST_PG", url)
    config = project / ".smllm" / "config.toml"
    config.write_text(
        config.read_text() + f'\n[state]\nurl-env = "SMLLM_TEST_PG"\nnamespace = "{namespace}"\n'
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each store test runs on both backends."""
    name: str = request.param
    return name


@pytest.fixture
def store_project(
    project: Path,
    env: dict[str, str],
    backend: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """The example project on BACKEND: its instances in .smllm/state (SQLite) or in a namespace
    of the test server (PostgreSQL)."""
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        use_postgres(project, url, request.getfixturevalue("pg_namespace"), env, monkeypatch)
    return project


# -- the PostgreSQL brokers' tests (test_store_pg_broker*.py) -------------------------------------


@pytest.fixture
def runtime(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The brokers' folder (helpers/store_brokers.py: `broker_runtime`)."""
    from helpers.store_brokers import broker_runtime

    with broker_runtime(env, monkeypatch) as folder:
        yield folder


@pytest.fixture
def pg(
    project: Path,
    env: dict[str, str],
    pg_url: str,
    pg_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    runtime: Path,
) -> Path:
    """The example project on the test server (url-env), its brokers in `runtime`."""
    use_postgres(project, pg_url, pg_namespace, env, monkeypatch)
    return project
