"""What the benchmarks share: timing statistics and the lines of their reports, and the tools
that measure outside the process: the disk, child processes, a venv holding a regular install
of the package, and strace's count of device flushes. Stdlib only."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "MARK",
    "Ratios",
    "Stats",
    "cached_bytecode_env",
    "fdatasync_ms",
    "fs_type",
    "heading",
    "import_report",
    "layers",
    "loaded_modules",
    "process_block",
    "process_times",
    "regular_install",
    "run_proc",
    "site_pth_files",
    "strace_syncs",
    "timed",
    "tmpfs_dir",
    "verdict",
]


class Stats(NamedTuple):
    n: int
    median: float
    p90: float
    low: float
    mean: float

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        s = sorted(values)
        p90 = s[max(0, math.ceil(0.9 * len(s)) - 1)]  # nearest rank
        return cls(len(s), statistics.median(s), p90, s[0], statistics.fmean(s))

    def line(self, unit: str = "ms", scale: float = 1.0, digits: int = 3) -> str:
        """`median … p90 … min … (n=…)`, each value times `scale`, in `unit`."""

        def show(value: float) -> str:
            return f"{value * scale:8.{digits}f} {unit}"

        return (
            f"median {show(self.median)}   p90 {show(self.p90)}   min {show(self.low)}   "
            f"(n={self.n})"
        )


def heading(title: str) -> None:
    print()
    print(f"== {title} " + "=" * max(0, 86 - len(title)))


def verdict(ok: bool | None) -> str:
    return "info" if ok is None else "PASS" if ok else "MISS"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter_ns()
    value = fn()
    return (time.perf_counter_ns() - t0) / 1e6, value


# -- the disk -------------------------------------------------------------------------------------


def fs_type(path: str) -> str:
    """The file system of `path` (from /proc/mounts), or '?'."""
    try:
        best, kind = "", "?"
        real = os.path.realpath(path)
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and real.startswith(parts[1]) and len(parts[1]) > len(best):
                    best, kind = parts[1], parts[2]
        return kind
    except OSError:
        return "?"


def fdatasync_ms(folder: str, n: int) -> Stats:
    """A 4 KiB append then fdatasync (what one WAL commit with synchronous=FULL waits for)."""
    path = os.path.join(folder, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sync = getattr(os, "fdatasync", os.fsync)
    out = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            t0 = time.perf_counter_ns()
            sync(fd)
            out.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        os.close(fd)
        os.unlink(path)
    return Stats.of(out)


def tmpfs_dir(root: str) -> str | None:
    """/dev/shm when it is a writable tmpfs and `root` isn't one already (fsync is free there)."""
    shm = "/dev/shm"
    if fs_type(root) == "tmpfs" or not os.path.isdir(shm) or fs_type(shm) != "tmpfs":
        return None
    return shm if os.access(shm, os.W_OK) else None


# -- child processes ------------------------------------------------------------------------------


def _child_cpu() -> float:
    """CPU seconds (user + system) of the reaped children so far; 0.0 where unknown."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_proc(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of `argv`."""
    c0 = _child_cpu()
    t0 = time.perf_counter_ns()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter_ns() - t0) / 1e6
    cpu = (_child_cpu() - c0) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()}")
    return ms, cpu


def process_times(
    variants: dict[str, list[str]], cwd: str, env: dict[str, str], n: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU times (ms) of `n` runs of each variant."""
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    for argv in variants.values():  # warm the OS page cache, the .pyc files, the machine cache
        for _ in range(3):
            run_proc(argv, cwd, env)
    for _ in range(n):
        for name, argv in variants.items():  # interleaved: drift hits all alike
            w, c = run_proc(argv, cwd, env)
            wall[name].append(w)
            cpu[name].append(c)
    return wall, cpu


def site_pth_files() -> list[str]:
    """The .pth files in this interpreter's site-packages (each may run code at start-up)."""
    import site

    found = []
    for folder in [*site.getsitepackages(), site.getusersitepackages()]:
        with contextlib.suppress(OSError):
            found += [n for n in os.listdir(folder) if n.endswith(".pth")]
    return sorted(found)


def cached_bytecode_env(env: dict[str, str], root: str) -> dict[str, str]:
    """`env` with .pyc files written and read (under `root`), as in a normal install."""
    out = dict(env)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    out["PYTHONPYCACHEPREFIX"] = os.path.join(root, "pycache")
    return out


class Ratios(NamedTuple):
    """A command's process over `python -c pass`, medians: wall and CPU (None where unknown)."""

    wall: float
    cpu: float | None

    def text(self) -> str:
        cpu = f", CPU {self.cpu:.2f}x" if self.cpu is not None else ""
        return f"{self.wall:.2f}x wall{cpu}"


def process_block(
    label: str,
    python: str,
    cmd: list[str],
    cwd: str,
    env: dict[str, str],
    runs: int,
    script: str | None = None,
) -> dict[str, Ratios]:
    """`python -c pass` vs `python -m CMD` (CMD: a module, then its arguments) and, with
    `script`, the console script run by path; prints them, returns each one's ratios to the
    first ({} if a run failed). Variants are named `python -m TITLE` and `TITLE (script)`,
    TITLE being CMD without its last argument."""
    title = " ".join(cmd[:-1])
    variants = {
        "python -c pass": [python, "-c", "pass"],
        f"python -m {title}": [python, "-m", *cmd],
    }
    if script is not None:
        variants[f"{title} (script)"] = [script, *cmd[1:]]
    print(f"  {label}")
    try:
        wall, cpu = process_times(variants, cwd, env, runs)
    except RuntimeError as exc:
        print(f"    failed: {exc}")
        return {}
    stats = {k: Stats.of(v) for k, v in wall.items()}
    for name, st in stats.items():
        print(f"    {name:<30} {st.line()}")
    base = stats["python -c pass"].median
    cpu_base = statistics.median(cpu["python -c pass"])
    out: dict[str, Ratios] = {}
    for name in list(variants)[1:]:
        show = stats[name].median
        cpu_show = statistics.median(cpu[name])
        r = out[name] = Ratios(show / base, cpu_show / cpu_base if cpu_base > 0 else None)
        line = f"    {name}: {r.text()} (adds {show - base:.1f} ms wall"
        print(line + (f", {cpu_show - cpu_base:.1f} ms CPU)" if cpu_base > 0 else ")"))
    return out


# a hot command ends through os._exit (no exit handlers): the dump goes before it too
_DUMP = (
    "import atexit, os, runpy, sys\n"
    "def _dump():\n"
    "    with open({out!r}, 'w') as f:\n"
    "        f.write('\\n'.join(sorted(sys.modules)))\n"
    "atexit.register(_dump)\n"
    "_exit = os._exit\n"
    "os._exit = lambda code: (_dump(), _exit(code))\n"
    "sys.argv = {argv!r}\n"
    "{run}\n"
)


def loaded_modules(python: str, cmd: list[str] | None, cwd: str, env: dict[str, str]) -> set[str]:
    """sys.modules at exit of `python -m CMD` (or of a bare `python -c` when None)."""
    out = os.path.join(cwd, ".bench-modules")
    run = f"runpy.run_module({cmd[0]!r}, run_name='__main__')" if cmd is not None else "pass"
    code = _DUMP.format(out=out, argv=cmd or [""], run=run)
    subprocess.run([python, "-c", code], cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    try:
        with open(out) as f:
            return set(f.read().split())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(out)


def layers(python: str, cmd: list[str], cwd: str, env: dict[str, str], runs: int) -> None:
    """The `python -m CMD` process in layers: bare python, + its stdlib imports, + the
    package's (CMD[0]'s) own modules."""
    package = cmd[0]
    base = loaded_modules(python, None, cwd, env)
    show = loaded_modules(python, cmd, cwd, env)
    extra = sorted(show - base - {"__main__", "runpy"})
    stdlib = [m for m in extra if m.split(".")[0] != package]
    ours = [m for m in extra if m.split(".")[0] == package]

    def importer(names: list[str]) -> list[str]:
        code = (
            "import importlib\n"
            f"for m in {names!r}:\n"
            "    try:\n"
            "        importlib.import_module(m)\n"
            "    except Exception:\n"
            "        pass\n"
        )
        return [python, "-c", code]

    variants = {
        "python -c pass": [python, "-c", "pass"],
        f"+ its {len(stdlib)} stdlib modules": importer(stdlib),
        f"+ {package}'s {len(ours)} modules": importer(stdlib + ours),
        f"python -m {' '.join(cmd[:-1])}": [python, "-m", *cmd],
    }
    wall, _ = process_times(variants, cwd, env, runs)
    bare = statistics.median(wall["python -c pass"])
    for name, times in wall.items():
        st = Stats.of(times)
        print(f"    {name:<30} median {st.median:7.1f} ms  = {st.median / bare:4.2f}x bare")
    print(f"    stdlib modules: {' '.join(m for m in stdlib if '.' not in m)}")


def import_report(python: str, cmd: list[str], cwd: str, env: dict[str, str], top: int) -> None:
    """Print the top `top` imports of `python -m CMD` by cumulative time (-X importtime)."""
    package = cmd[0]
    argv = [python, "-X", "importtime", "-m", *cmd]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    rows: list[tuple[int, int, str]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        rows.append((int(parts[1]), int(parts[0]), parts[2].rstrip()))
    total_self = sum(r[1] for r in rows)
    ours = sum(r[1] for r in rows if r[2].strip().split(".")[0] == package)
    print(
        f"  {len(rows)} modules imported, {total_self / 1000:.1f} ms of import time in all "
        f"({package}'s own modules {ours / 1000:.1f} ms, the rest "
        f"{(total_self - ours) / 1000:.1f} ms)"
    )
    print(f"  {'cumulative':>12} {'self':>10}  module (indent = nesting)")
    for cum, own, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cum / 1000:9.2f} ms {own / 1000:7.2f} ms  {name}")


# -- a regular install ----------------------------------------------------------------------------


def _bin(folder: str, name: str) -> str:
    return os.path.join(folder, "Scripts" if os.name == "nt" else "bin", name)


def _package_files(repo: str) -> list[str]:
    """What `pip install REPO` builds from: pyproject.toml, README.md and src/ (no caches)."""
    out = [os.path.join(repo, n) for n in ("pyproject.toml", "README.md")]
    for folder, dirs, files in os.walk(os.path.join(repo, "src")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
        out += [os.path.join(folder, f) for f in sorted(files) if not f.endswith(".pyc")]
    return [p for p in out if os.path.isfile(p)]


def _digest(repo: str) -> str:
    """The hash of the sources and of the interpreter a venv of them would run on."""
    base = getattr(sys, "_base_executable", sys.executable)
    h = hashlib.sha256(f"{sys.version}\0{base}\0{_PIP}\0".encode())
    for path in _package_files(repo):
        h.update(os.path.relpath(path, repo).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read() + b"\0")
    return h.hexdigest()[:16]


def _pip(what: str, argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(f"`pip {what}` failed: {lines[-1] if lines else proc.returncode}")


#: the first pip whose console-script template doesn't import `re` (pip 25.2, July 2025): what a
#: user installing today gets (a current pip, pipx or uv); older pips add `import re` (+9 ms here)
#: before smllm's first line runs, which no code of smllm's can change
_PIP = "pip>=25.2"


def _current_pip(cache: str) -> tuple[list[str], str]:
    """A pip of `_PIP` to install with: this interpreter's where it is one, else a pip wheel
    downloaded once into `cache` and run from the wheel file (pip runs from its own wheel).
    Falls back to this interpreter's pip where the download fails (offline): (argv, which)."""
    here = [sys.executable, "-m", "pip"]
    proc = subprocess.run([*here, "--version"], capture_output=True, text=True)
    version = proc.stdout.split()[1] if proc.returncode == 0 and proc.stdout else "0"
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) >= (25, 2):
        return here, f"pip {version}"
    folder = os.path.join(cache, "pip")
    wheels = (
        sorted(n for n in os.listdir(folder) if n.endswith(".whl")) if os.path.isdir(folder) else []
    )
    if not wheels:
        get = [
            *here,
            "--disable-pip-version-check",
            "--quiet",
            "download",
            "--no-deps",
            "--dest",
            folder,
        ]
        subprocess.run([*get, _PIP], capture_output=True, text=True, timeout=300)
        wheels = (
            sorted(n for n in os.listdir(folder) if n.endswith(".whl"))
            if os.path.isdir(folder)
            else []
        )
    if not wheels:
        return here, f"pip {version} (no {_PIP} could be downloaded: its template imports re)"
    wheel = os.path.join(folder, wheels[-1])
    return [sys.executable, os.path.join(wheel, "pip")], f"pip {wheels[-1].split('-')[1]}"


def _pip_install(repo: str, python: str, cache: str) -> str:
    """`pip install REPO` into the venv of `python` by a current pip (`_current_pip`): a wheel
    built from a copy of the sources (an in-tree build would leave build/ and egg-info in the
    repo), then installed (pip compiles its .pyc). Raises RuntimeError saying why it failed."""
    tool, which = _current_pip(cache)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        tree = os.path.join(tmp, "tree")
        for path in _package_files(repo):
            dest = os.path.join(tree, os.path.relpath(path, repo))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(path, dest)
        wheels = os.path.join(tmp, "wheels")
        pip = [*tool, "--disable-pip-version-check", "--quiet"]
        _pip("wheel", [*pip, "wheel", "--no-deps", "--wheel-dir", wheels, tree])
        built = [os.path.join(wheels, n) for n in os.listdir(wheels)]
        _pip("install", [*pip, "--python", python, "install", "--no-deps", "--no-index", *built])
    return f"{which} install --no-deps of a wheel built from the sources"


def _copy_install(repo: str, python: str, package: str, entry: str) -> str:
    """What pip's install of a pure-Python wheel amounts to, done by hand (offline, no build
    backend): the package copied into site-packages, its .pyc compiled, the console script."""
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest = os.path.join(purelib, package)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(
        os.path.join(repo, "src", package), dest, ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run([python, "-m", "compileall", "-q", dest], check=True, capture_output=True)
    module, func = entry.split(":")
    script = _bin(os.path.dirname(os.path.dirname(python)), package)
    with open(script, "w") as f:  # the console-script template of pip >= 25.2 (_PIP)
        f.write(
            f"#!{python}\nimport sys\nfrom {module} import {func}\n"
            "if __name__ == '__main__':\n"
            "    sys.argv[0] = sys.argv[0].removesuffix('.exe')\n"
            f"    sys.exit({func}())\n"
        )
    os.chmod(script, 0o755)
    return "copied into site-packages by hand"


def regular_install(repo: str, cache: str, package: str, entry: str) -> tuple[str | None, str]:
    """A venv (without the host's site-packages, so none of its .pth files run) holding
    `package` installed from `repo` as a user gets it: not editable, .pyc compiled. Made by
    `pip install --no-deps`: the dependencies are left out because the measured path never
    imports them and none has a .pth file, so they change nothing at start-up, and leaving
    them out needs no index. Where pip can't (no build backend offline), the same files are
    copied by hand. Kept in `cache` under the hash of the sources: an unchanged tree reuses it.

    Returns (the venv's python, or None; how it was made)."""
    folder = os.path.join(cache, f"venv-{_digest(repo)}")
    python = _bin(folder, "python")
    ready = os.path.join(folder, "bench-ready")
    with contextlib.suppress(OSError), open(ready) as f:
        return python, f"{f.read().strip()}; reused {folder}"
    with contextlib.suppress(OSError):  # one venv at a time: drop those of older trees
        for name in os.listdir(cache):
            if name.startswith("venv-"):
                shutil.rmtree(os.path.join(cache, name), ignore_errors=True)
    try:
        venv.create(folder, with_pip=False, symlinks=os.name != "nt")
        try:
            how = _pip_install(repo, python, cache)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            how = f"{_copy_install(repo, python, package, entry)} ({exc})"
        with open(ready, "w") as f:
            f.write(how + "\n")
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"no venv: {exc}"
    return python, f"{how}; made {folder}"


# -- device flushes -------------------------------------------------------------------------------

MARK = "/nonexistent-bench-mark-"
_SYNC = re.compile(r"\b(?:fsync|fdatasync)\(\d+<([^>]*)>")


def strace_syncs(
    argv: list[str], cwd: str, env: dict[str, str], log: str
) -> tuple[dict[str, Counter[str]] | None, str]:
    """The fsync/fdatasync calls of `argv` and its children, by file, under `strace -f -y`;
    split into parts where the program opens `MARK + NAME` (an open that fails, as a marker).
    Returns ({part name ("" before the first mark): {path: count}}, the program's stdout), or
    (None, why not)."""
    strace = shutil.which("strace")
    if strace is None:
        return None, "strace is not installed"
    trace = [strace, "-f", "-y", "-o", log, "-e", "trace=fsync,fdatasync,openat,open"]
    proc = subprocess.run([*trace, *argv], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return None, f"failed under strace: {lines[-1] if lines else proc.returncode}"
    parts: dict[str, Counter[str]] = {"": Counter()}
    part = ""
    with open(log) as f:
        for line in f:
            if MARK in line:
                part = line.split(MARK, 1)[1].split('"', 1)[0]
                parts[part] = Counter()
            elif (m := _SYNC.search(line)) is not None:
                parts[part][m.group(1)] += 1
    return parts, proc.stdout
