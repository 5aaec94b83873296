"""A PostgreSQL store read through its broker: the stop hook's cheap path (issue 20 §7).

A blocked stop reads one or two things from the team store (the held instance's row, and the
paused list when that instance left the session), yet a hook process that reads them itself
pays for psycopg's import and a new connection: six times a SQLite project's whole stop. So
the hook asks a broker instead (store/broker.py): one small process per store and version
that keeps one connection open, listens on a Unix socket in a private folder, and runs a
fresh query for each request, so a takeover or a pause from another host is seen by the very
next stop. It leaves after IDLE_SECS without a request.

`BrokeredStore.instance` and `.paused` ask the broker, through `_socket` (the `socket` module
imports enum and selectors: a few milliseconds). Where no broker answers (none yet, a dead
one's socket, another version's, a timeout, a garbled reply) the call is answered directly,
as a PostgresStore answers it, and where none was listening a broker is started, detached,
for the next stops. An error the broker met (the server unreachable) is raised as the direct
path raises it. Every other method is the PostgresStore's own, unchanged.

The socket is `FOLDER/KEY.sock`: FOLDER is `$XDG_RUNTIME_DIR/smllm`, else the state folder's
`brokers`, mode 0700; KEY is a hash of the URL, the namespace, the PG* variables libpq reads,
smllm's version and the host's name, so no credential shows in a path and a rotated password
(a new URL) gets a broker of its own. A socket path longer than the kernel takes means no
broker: the direct path. `SMLLM_STORE_BROKER=0` turns brokers off; `SMLLM_STORE_BROKER_IDLE`
is the idle time in seconds (tests shorten it).
"""

from __future__ import annotations

import os

from .. import __version__
from ..errors import StoreBusy, StoreError
from ..jsontext import dumps, loads
from .base import first_instance, paused_found, read_instance

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TypeVar

    from ..engine.records import HistoryRecord, Instance, InstanceWrite
    from .base import SavedRow, StoreDump
    from .postgres import PostgresStore

    T = TypeVar("T")

__all__ = [
    "ENV_IDLE",
    "ENV_SWITCH",
    "IDLE_SECS",
    "TAG",
    "BrokeredStore",
    "broker_folder",
    "broker_key",
    "socket_path",
]

#: the wire's version: a broker answers with its own, and a client that reads another one
#: falls back (and starts a broker of its own version)
PROTOCOL = 1
TAG = f"{PROTOCOL}/{__version__}"
#: how long a stop waits for the broker's answer before reading directly: a broker answers in
#: a millisecond or two, and waits on the server only as long as the direct path would
WAIT_SECS = 2.0
#: how long a broker stays without a request
IDLE_SECS = 600.0
#: the most a request or an answer may hold (an answer is a few instance records)
LINE_LIMIT = 64 << 20
ENV_SWITCH = "SMLLM_STORE_BROKER"
ENV_IDLE = "SMLLM_STORE_BROKER_IDLE"
#: sockaddr_un's sun_path holds 108 bytes on Linux, 104 on macOS, the last one a NUL
_PATH_MAX = 103


def broker_folder() -> str:
    """Where the brokers' sockets and logs are (the runtime folder is the user's own and
    emptied at logout; without one, the state folder)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "smllm")
    from .user import state_home

    return os.path.join(state_home(), "brokers")


def broker_key(url: str, namespace: str) -> str:
    """The name of the broker of a store: a hash of everything its connection depends on."""
    try:
        from _blake2 import blake2b  # the C module: hashlib loads OpenSSL (~3 ms)
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    libpq = sorted((k, v) for k, v in os.environ.items() if k.startswith("PG"))
    # the host too: a state folder on a home that several machines share (NFS) holds a
    # socket per machine, as a socket serves its own machine alone
    text = dumps([TAG, url, namespace, libpq, os.uname().nodename])
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def socket_path(url: str, namespace: str) -> str | None:
    """The broker's socket for a store; None where the path is too long for a socket, or the
    system has no Unix sockets and posix_spawn (Windows: every read is direct there)."""
    if not hasattr(os, "posix_spawn"):
        return None
    path = os.path.join(broker_folder(), broker_key(url, namespace) + ".sock")
    return path if len(path.encode("utf-8", "surrogateescape")) <= _PATH_MAX else None


class _Fallback(Exception):
    """No broker answered; `start`: none was there, so one should be started."""

    def __init__(self, start: bool) -> None:
        super().__init__()
        self.start = start


class BrokeredStore:
    """A namespace of a PostgreSQL database, as an InstanceStore, whose `instance` and
    `paused` reads go through the store's broker."""

    def __init__(self, url: str, namespace: str = "default") -> None:
        self.url = url
        self.namespace = namespace
        self._direct: PostgresStore | None = None
        self._path: str | None = None

    @property
    def name(self) -> str:
        """The store as messages name it: only a message needs it (its module imports `re`)."""
        return self.direct().name

    @name.setter
    def name(self, value: str) -> None:
        self.direct().name = value

    def direct(self) -> PostgresStore:
        """The store read and written directly: psycopg and a connection of this process."""
        if self._direct is None:
            from .postgres import PostgresStore

            self._direct = PostgresStore(self.url, self.namespace)
        return self._direct

    # -- the reads a stop makes, through the broker ----------------------------------------------

    def instance(self, machine: str, id: str) -> Instance | None:
        try:
            rows = self._ask({"op": "instance", "args": [machine, id]})[0]
        except _Fallback as no:
            return self._fallen_back(no, lambda: self.direct().instance(machine, id))
        if not rows:
            return None
        try:
            return read_instance(rows[0][0])
        except ValueError:  # as the direct path words it (the store's name costs an import)
            return first_instance(self.name, rows)

    def paused(self, machines: Sequence[str], limit: int | None) -> tuple[list[Instance], int]:
        if not machines:
            return [], 0
        try:
            rows, total = self._ask({"op": "paused", "args": [list(machines), limit]})
        except _Fallback as no:
            return self._fallen_back(no, lambda: self.direct().paused(machines, limit))
        return paused_found(rows, total)

    def _fallen_back(self, no: _Fallback, read: Callable[[], T]) -> T:
        """`read()` directly, as this store's later reads will be (its connection is open
        then); first a broker started for the next stops, where none was there."""
        started = self._start() if no.start else None
        self._path = ""
        try:
            return read()
        finally:
            if started is not None:
                _reap(started)

    def _ask(self, request: dict[str, Any]) -> tuple[list[Any], int]:
        """The broker's rows (and count) for `request`; _Fallback where it gives none, the
        store's error where the broker met one."""
        if os.environ.get(ENV_SWITCH) == "0":
            raise _Fallback(False)
        if self._path is None:
            self._path = socket_path(self.url, self.namespace) or ""
        if not self._path:  # too long for a socket, or fallen back already
            raise _Fallback(False)
        if not _private(os.path.dirname(self._path)):
            raise _Fallback(True)  # the broker makes it, or makes it private again
        request["tag"] = TAG
        reply = _exchange(self._path, (dumps(request) + "\n").encode("utf-8", "surrogatepass"))
        return _answer(reply)

    def _start(self) -> int | None:
        """Start this store's broker, detached; the pid to reap (None where it can't)."""
        assert self._path
        try:
            return spawn(self._path, self.url, self.namespace)
        except OSError:
            return None  # no broker, then: every stop reads directly, as before brokers

    # -- everything else: the PostgreSQL store's own ---------------------------------------------

    def find(self, machine: str, id_or_ref: str) -> Instance | None:
        return self.direct().find(machine, id_or_ref)

    def taken(self, machine: str, value: str) -> bool:
        return self.direct().taken(machine, value)

    def instances(
        self, machines: Sequence[str] | None, statuses: Sequence[str] | None
    ) -> list[Instance]:
        return self.direct().instances(machines, statuses)

    def history(self, machine: str, id: str) -> list[HistoryRecord]:
        return self.direct().history(machine, id)

    def held_by(self, key: str) -> list[Instance]:
        return self.direct().held_by(key)

    def commit_instances(self, writes: Sequence[InstanceWrite]) -> None:
        self.direct().commit_instances(writes)

    def saved(self) -> list[SavedRow]:
        return self.direct().saved()

    def dump(self) -> StoreDump:
        return self.direct().dump()

    def load(self, dump: StoreDump, unchanged: Callable[[], bool]) -> None:
        self.direct().load(dump, unchanged)

    def discard(self, dump: StoreDump) -> bool:
        return self.direct().discard(dump)

    def close(self) -> None:
        if self._direct is not None:
            self._direct.close()


def _private(folder: str) -> bool:
    """Whether `folder` is a real folder of this user's that no one else may enter (a socket
    in any other is not trusted); a missing one is made by the broker."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    is_dir = (st.st_mode & 0o170000) == 0o040000  # stat.S_ISDIR, without the import
    return is_dir and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _exchange(path: str, request: bytes) -> bytes:
    """One request to the broker at `path`, and its answer line."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(WAIT_SECS)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise _Fallback(True) from None  # no broker, or a dead one's socket
        sock.sendall(request)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if chunk.endswith(b"\n") or size > LINE_LIMIT:
                break
    except OSError:  # a timeout, a reset: that broker is busy or leaving, so no new one
        raise _Fallback(False) from None
    finally:
        sock.close()
    return b"".join(chunks)


def _answer(reply: bytes) -> tuple[list[Any], int]:
    """The rows of a broker's answer line; the store's error it relays; else _Fallback."""
    try:
        answer = loads(reply.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Fallback(True) from None  # not a broker of ours: replace it
    if not isinstance(answer, dict) or answer.get("tag") != TAG:
        raise _Fallback(True)  # another version's broker: it leaves, and ours starts
    error = answer.get("error")
    if isinstance(error, str):
        if answer.get("busy") is True:
            raise StoreBusy()
        raise StoreError(error)
    rows = answer.get("rows")
    total = answer.get("total", 0)
    if (
        not isinstance(rows, list)
        or not all(isinstance(r, list) and r and isinstance(r[0], str) for r in rows)
        or not isinstance(total, int)
    ):
        raise _Fallback(False)
    return rows, total


def spawn(path: str, url: str, namespace: str) -> int:
    """Start the broker for `path` (`python -m smllm.store.broker`, which forks itself away
    and returns at once); its pid, to reap. The URL goes through a pipe on its stdin: never
    on its command line, nor in its environment (the variable holding it is left out)."""
    import sys

    if not sys.executable:
        raise OSError("no Python to start the broker with")
    config = dumps({"socket": path, "url": url, "namespace": namespace, "tag": TAG})
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, config.encode("utf-8", "surrogatepass"))  # far less than a pipe
    finally:
        os.close(write_end)
    devnull = os.open(os.devnull, os.O_RDWR)
    env = {k: v for k, v in os.environ.items() if v != url}
    try:
        return os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "smllm.store.broker", os.path.basename(path)],
            env,
            # its own stdout and stderr: a client reading the hook's output to its end
            # mustn't wait for the broker too
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_end, 0),
                (os.POSIX_SPAWN_DUP2, devnull, 1),
                (os.POSIX_SPAWN_DUP2, devnull, 2),
            ],
            setsid=True,  # out of the client's process group: a hook timeout's kill spares it
        )
    finally:
        os.close(read_end)
        os.close(devnull)


def _reap(pid: int, within: float = 2.0) -> None:
    """Wait for the started process, which leaves as soon as it has forked the broker (by the
    time the direct read is done, it has); one still there after `within` seconds is left to
    the kernel, so a slow start never holds the stop up."""
    from time import monotonic, sleep

    end = monotonic() + within
    try:
        while os.waitpid(pid, os.WNOHANG)[0] == 0 and monotonic() < end:
            sleep(0.005)
    except ChildProcessError:
        pass
