"""The compiled-machine cache: parse YAML only when a file the load read has changed.

Keyed on the set of config paths; valid while every file the load read or looked for has the
same size and mtime (and, for a file changed within 2 s of the cache's build, the same
content: mtimes are too coarse to tell such an edit apart). The hook path loads machines
through here and so never imports `yaml` or `jsonschema` on a warm cache.

A cache file is a header, then the pickled machines. The header (marshal: built in, unlike
pickle's module) holds what the freshness check reads and the machines' summary (summary.py),
so the status line and a yielded stop read it without unpickling anything.
"""

from __future__ import annotations

import marshal
import os
import stat
import time

from ... import __version__
from ...files import read_regular
from ..summary import MachineKind, Summary, from_plain, to_plain

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from ..model import Loaded

__all__ = ["CACHE_FORMAT", "RACY_NS", "cache_dir", "load_cached", "summary_cached", "summary_of"]

#: bump when the compiled records or the checks change, so old caches are ignored (a cache
#: also names the smllm version that wrote it: an upgrade never reads an older one)
CACHE_FORMAT = 11
#: cli-and-harnesses.md §4: files changed this close to the build are compared by content.
RACY_NS = 2_000_000_000

#: how a cache file starts; the header's length follows, 4 bytes little-endian
MAGIC = b"smllm-machines\n"
_START = len(MAGIC) + 4


def _pickle_loads(data: memoryview) -> Any:
    """The C unpickler alone: `pickle` itself costs ~2 ms of imports on every hook call, and
    `_pickle` one more, which the summary's readers never pay."""
    try:
        from _pickle import loads
    except ImportError:  # pragma: no cover - Python builds without the accelerator
        from pickle import loads
    return loads(data)


#: (path, size, mtime, the bytes of a regular file changed close to the build, else False); a
#: missing file is (path, None, None, False). Any path the load looked for is one, found or
#: not: a file created later must invalidate the cache as surely as one edited.
Signature = tuple[str, int | None, int | None, bytes | bool | None]


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "smllm")


def _signature(path: str, built_ns: int) -> Signature:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return (path, None, None, False)
    # a file changed this close to the build may change again within the mtime's resolution:
    # keep its bytes, and compare them (not a checksum: no zlib on the hook path). Only a
    # regular file has bytes to keep: a FIFO, a socket, a device or a folder is never opened
    # (opening a FIFO would block until a writer came).
    racy: bytes | bool | None = False
    if stat.S_ISREG(st.st_mode) and st.st_mtime_ns >= built_ns - RACY_NS:
        racy = _content(path)
    return (path, st.st_size, st.st_mtime_ns, racy)


def _content(path: str) -> bytes | None:
    """The regular file's bytes, or None when it can't be read or isn't a regular file."""
    return read_regular(path)[0]


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a: a stable name for a short key, without zlib's import on the hook path."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def _fresh(signatures: list[Signature]) -> bool:
    for sig in signatures:
        path, size, mtime, racy = sig
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            if size is not None:
                return False
            continue
        if size is None or st.st_size != size or st.st_mtime_ns != mtime:
            return False
        if racy is not False and _content(path) != racy:
            return False
    return True


def _path(configs: tuple[str, ...]) -> str:
    key = "\0".join(configs).encode("utf-8", "surrogateescape")
    return os.path.join(cache_dir(), f"machines-{_fnv1a(key):08x}-{len(key)}.pickle")


#: what this process already loaded, by cache path: (signatures, loaded)
_MEMO: dict[str, tuple[list[Signature], Loaded]] = {}


def _header(path: str, configs: tuple[str, ...]) -> tuple[dict[str, Any], memoryview] | None:
    """The cache file's header and the pickled machines after it (not copied), when the file
    is this version's cache of `configs` and no file it read changed since; else None."""
    try:
        data = read_regular(path)[0]  # never blocks, even on a FIFO where the cache goes
        if data is None or not data.startswith(MAGIC):
            return None
        end = _START + int.from_bytes(data[len(MAGIC) : _START], "little")
        header = marshal.loads(data[_START:end])
        if (
            isinstance(header, dict)
            and header.get("format") == CACHE_FORMAT
            and header.get("smllm") == __version__
            and header.get("configs") == configs
            and _fresh(header["signatures"])
        ):
            return header, memoryview(data)[end:]
    except Exception:  # a damaged cache is a missing one
        pass
    return None


def summary_of(loaded: Loaded) -> Summary:
    """The summary of loaded machines (summary.py)."""
    return Summary(
        loaded.configs,
        {name: MachineKind(m.kind) for name, m in loaded.machines.items()},
        dict(loaded.stores),
        dict(loaded.config_stores),
    )


def summary_cached(configs: tuple[str, ...]) -> Summary:
    """The summary of `configs`' machines: from the cache's header when no file changed, else
    from the machines themselves (loading or rebuilding them)."""
    path = _path(configs)
    if path not in _MEMO:  # else load_cached answers from this process's memo
        found = _header(path, configs)
        if found is not None:
            try:
                return from_plain(found[0]["summary"])
            except Exception:  # a damaged summary: the machines decide
                pass
    return summary_of(load_cached(configs))


def load_cached(configs: tuple[str, ...]) -> Loaded:
    """The loaded machines of `configs`, from the cache when no file changed."""
    path = _path(configs)
    memo = _MEMO.get(path)
    if memo is not None and memo[1].configs == configs and _fresh(memo[0]):
        return memo[1]
    found = _header(path, configs)
    if found is not None:
        header, machines = found
        try:
            loaded: Loaded = _pickle_loads(machines)
            _MEMO[path] = (header["signatures"], loaded)
            return loaded
        except Exception:  # damaged machines are rebuilt
            pass
    built_ns = time.time_ns()
    from .config import load_configs  # a warm cache never reads a config: not on the hook path

    loaded = load_configs(configs, cwd="")  # findings name files by absolute path
    signatures = [_signature(p, built_ns) for p in dict.fromkeys(loaded.files)]
    _MEMO[path] = (signatures, loaded)
    header = {
        "format": CACHE_FORMAT,
        "smllm": __version__,
        "configs": configs,
        "signatures": signatures,
        "summary": to_plain(summary_of(loaded)),
    }
    try:
        import pickle

        head = marshal.dumps(header)
        body = pickle.dumps(loaded, protocol=pickle.HIGHEST_PROTOCOL)
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        # the owner's alone: a config's `[state] url` may carry a database password
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(MAGIC + len(head).to_bytes(4, "little") + head + body)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that can't be written only costs speed
    return loaded
