"""The store broker: one process per PostgreSQL store, answering the stop hook's reads over a
Unix socket with one connection it keeps (store/brokered.py says why, and has the client).

    python -m smllm.store.broker KEY    # as a stop starts it: its config on stdin, one line

It reads its config (the socket path, the URL, the namespace, the starting smllm's tag) from
stdin, so the URL is on no command line, then forks away (the stop reaps the first process at
once, and the broker is no child of the client's). Then, in order:

1. its folder is made private (0700), or it leaves if someone else owns it;
2. it locks `KEY.log`, its log: one broker per store, and a second one started meanwhile
   leaves after waiting briefly (the first may be on its way out);
3. it imports psycopg and connects, so the first request finds it warm (a server it can't
   reach ends it: the stop that started it reads directly, and the next starts another);
4. it replaces whatever is at `KEY.sock` (a dead broker's socket: the lock says none lives)
   with its own socket, mode 0600, and answers one JSON line per connection:
   `{"tag", "op": "instance", "args": [machine, id]}` → `{"tag", "rows": [[data]]}`,
   `{"tag", "op": "paused", "args": [machines, limit]}` → `{"tag", "rows", "total"}`, or
   `{"tag", "error": message, "busy": bool}` for an error of the store's. Each request is a
   new query, in autocommit: a takeover from another host is in the next answer.

It leaves after `SMLLM_STORE_BROKER_IDLE` seconds (default 600) without a request, when the
server closes its connection (a shutdown or restart: a broker never outlives its server), when
its socket is removed or replaced, on SIGTERM, on a request of another smllm's tag (so that
one's broker can take its place), and on any error it doesn't expect. Its log holds its start,
its end and why, and errors, each scrubbed of the URL's secrets.
"""

from __future__ import annotations

import contextlib
import os
import sys

from .brokered import ENV_IDLE, IDLE_SECS, LINE_LIMIT, TAG

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    import socket
    from typing import Any

    from .postgres import PostgresStore

__all__ = ["Broker", "main"]

#: how long a broker started beside a live one waits for its lock before leaving
LOCK_WAIT_SECS = 2.0
#: how often an idle broker looks at the clock and at its socket
TICK_SECS = 1.0
#: how long one client may take to send its request
CLIENT_SECS = 1.0


class _Leave(Exception):
    """The broker ends; the message says why (for its log)."""


def main() -> int:
    """Read the config, fork the broker away, and return at once (the broker never returns)."""
    from ..jsontext import loads

    try:
        config = loads(sys.stdin.buffer.read(1 << 16).decode("utf-8", "surrogatepass"))
        path, url, namespace, tag = (
            config["socket"],
            config["url"],
            config["namespace"],
            config["tag"],
        )
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, OSError):
        print("error: the broker reads its config as one JSON line on stdin", file=sys.stderr)
        return 2
    if tag != TAG or not str(path).endswith(".sock"):  # another smllm's stop: it reads directly
        return 2
    if os.fork():
        return 0
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)  # the config pipe, done with
        code = Broker(str(path), str(url), str(namespace), _idle()).run()
    finally:
        os._exit(code)  # the forked copy never returns into the caller's code


def _idle() -> float:
    try:
        value = float(os.environ.get(ENV_IDLE, ""))
    except ValueError:
        return IDLE_SECS
    return value if value > 0 else IDLE_SECS


class Broker:
    """One store's broker: its socket at `path`, its store at `url` and `namespace`."""

    def __init__(self, path: str, url: str, namespace: str, idle: float) -> None:
        self.path = path
        self.url = url
        self.namespace = namespace
        self.idle = idle
        self.log_fd = -1
        self.served = 0
        self.inode: tuple[int, int] | None = None

    def run(self) -> int:
        os.umask(0o077)  # the socket and the log: this user's alone
        folder = os.path.dirname(self.path)
        if not _private_folder(folder):
            return 1
        self.log_fd = os.open(
            self.path[: -len(".sock")] + ".log",
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        if not self._locked():
            return 0  # another broker serves this store
        os.ftruncate(self.log_fd, 0)
        self.log(f"broker {os.getpid()} of smllm {TAG} starts")
        from ..errors import StoreError
        from .postgres import PostgresStore

        store = PostgresStore(self.url, self.namespace)
        try:
            store.instance_rows("", "")  # psycopg imported, the connection made
        except StoreError as exc:
            self.log(f"leaves: {exc}")
            return 1
        except Exception as exc:
            self.log(f"leaves: {type(exc).__name__}: {exc}")
            return 1
        import signal

        signal.signal(signal.SIGTERM, _terminated)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        why = "an error"
        try:
            listener = self._listen()
            try:
                self._serve(listener, store)
            finally:
                listener.close()
                if self._socket_is_mine():
                    os.unlink(self.path)
        except _Leave as leave:
            why = str(leave)
        except Exception as exc:  # anything unexpected ends it: the next stop starts another
            why = f"{type(exc).__name__}: {self._scrub(str(exc))}"
        finally:
            store.close()
            self.log(f"leaves after {self.served} reads: {why}")
        return 0

    # -- life ------------------------------------------------------------------------------------

    def _locked(self) -> bool:
        import fcntl
        import time

        end = time.monotonic() + LOCK_WAIT_SECS
        while True:
            try:
                fcntl.flock(self.log_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= end:
                    return False
                time.sleep(0.02)

    def _listen(self) -> socket.socket:
        import socket

        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a dead broker's socket: the lock says none is alive
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(128)
        st = os.lstat(self.path)
        self.inode = (st.st_dev, st.st_ino)
        return listener

    def _socket_is_mine(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.inode

    def _serve(self, listener: socket.socket, store: PostgresStore) -> None:
        import select
        import time

        tick = min(TICK_SECS, self.idle)
        listener.settimeout(tick)
        last = time.monotonic()
        while True:
            server = store.connection_fd()
            watched = [listener.fileno()] if server is None else [listener.fileno(), server]
            ready = select.select(watched, [], [], tick)[0]
            if server is not None and server in ready:
                # an idle connection the server speaks on is one it ends (a shutdown, a restart,
                # idle_session_timeout): this broker goes with it, the next stop starts another
                raise _Leave("the server closed the connection")
            if not ready:
                if time.monotonic() - last >= self.idle:
                    raise _Leave(f"idle for {self.idle:g} s")
                if not self._socket_is_mine():
                    raise _Leave("its socket was removed")
                continue
            try:
                conn, _ = listener.accept()
            except (TimeoutError, InterruptedError):  # the client left meanwhile
                continue
            last = time.monotonic()
            with conn:
                self._answer(conn, store)

    def _answer(self, conn: socket.socket, store: PostgresStore) -> None:
        """Read one request from `conn` and answer it."""
        from ..errors import StoreBusy, StoreError
        from ..jsontext import dumps, loads

        conn.settimeout(CLIENT_SECS)
        try:
            request = loads(_line(conn).decode("utf-8", "surrogatepass"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return  # a client that left, or garbage: no answer (the client reads directly)
        if not isinstance(request, dict):
            return
        if request.get("tag") != TAG:
            _send(conn, dumps({"tag": TAG, "fail": "another smllm"}))
            raise _Leave(f"a stop of smllm {request.get('tag')!r} asked: it starts its own")
        try:
            reply = self._read(store, request.get("op"), request.get("args"))
        except StoreError as exc:  # the server unreachable, say: the stop fails as it would
            self.log(f"a read failed: {exc}")
            reply = {"error": str(exc), "busy": isinstance(exc, StoreBusy)}
        if reply is None:
            reply = {"fail": "not a request"}
        else:
            self.served += 1
        reply["tag"] = TAG
        with contextlib.suppress(OSError):  # the client gave up waiting: it read directly
            _send(conn, dumps(reply))

    @staticmethod
    def _read(store: PostgresStore, op: object, args: object) -> dict[str, Any] | None:
        if not isinstance(args, list):
            return None
        if op == "instance" and len(args) == 2 and all(isinstance(a, str) for a in args):
            rows = store.instance_rows(args[0], args[1])
            return {"rows": [[r[0]] for r in rows]}
        if op == "paused" and len(args) == 2:
            machines, limit = args
            names_ok = isinstance(machines, list) and all(isinstance(m, str) for m in machines)
            limit_ok = limit is None or (isinstance(limit, int) and not isinstance(limit, bool))
            if names_ok and limit_ok:
                rows, total = store.paused_rows(machines, limit)
                return {"rows": [[r[0]] for r in rows], "total": total}
        return None

    # -- the log ---------------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        from .postgres import scrub

        return scrub(text, self.url)

    def log(self, message: str) -> None:
        import time

        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self._scrub(message)}\n"
        with contextlib.suppress(OSError):  # a full disk mustn't end the broker
            os.write(self.log_fd, line.encode("utf-8", "replace"))


def _terminated(signum: int, frame: object) -> None:
    raise _Leave("terminated (SIGTERM)")


def _private_folder(folder: str) -> bool:
    """Make `folder` (mode 0700) or find it; whether it is a folder of this user's, now private."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
        if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != os.getuid():
            return False
        if st.st_mode & 0o077:
            os.chmod(folder, 0o700)
    except OSError:
        return False
    return True


def _line(conn: socket.socket) -> bytes:
    """One request line from `conn` (ValueError past LINE_LIMIT or without its newline)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)
        if size > LINE_LIMIT:
            break
    raise ValueError("no request line")


def _send(conn: socket.socket, text: str) -> None:
    conn.sendall((text + "\n").encode("utf-8", "surrogatepass"))


if __name__ == "__main__":
    sys.exit(main())
