"""A throw-away PostgreSQL server for the tests: a cluster in a temp dir, started with the
system's PostgreSQL binaries and removed at the end.

The server refuses to run as root, so under root the cluster belongs to the `postgres` user
(the Debian package makes it) and its commands run through `runuser`. Host connections need a
password (scram-sha-256), so the tests see the same authentication a team's server asks for.

    server = PgServer.start(Path("/tmp/x"))
    url = server.url("smllm")        # postgresql://smllm:PASSWORD@127.0.0.1:PORT/smllm
    server.stop(mode="immediate")    # a crash, as far as clients can tell
    server.restart()
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

#: a password with characters a URL must escape, so every message is checked for both forms
PASSWORD = "Pg s3cret/:@%!pw"
USER = "smllm"
DATABASE = "smllm"

INSTALL = "PostgreSQL 15 server binaries (apt-get install postgresql-15)"


def bindir() -> Path:
    """Where initdb and pg_ctl are: Debian's versioned folder, else PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if found:
        return Path(found[0]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError(f"no initdb found: install the {INSTALL}")


def runuser() -> str:
    """util-linux's runuser: in /usr/sbin or /sbin, which a PATH may leave out (a CI's)."""
    found = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise RuntimeError("no runuser found (util-linux): needed to run the server as postgres")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PgServer:
    def __init__(
        self, root: Path, port: int, listen: str = "127.0.0.1", prefix: list[str] | None = None
    ) -> None:
        self.root = root
        #: a command prefix for every server command, e.g. `ip netns exec NS` to run the
        #: server inside a network namespace (it then listens on that namespace's `listen`)
        self.prefix = list(prefix or [])
        self.data = root / "data"
        self.port = port
        self.listen = listen
        self.bin = bindir()
        self.as_postgres = os.geteuid() == 0

    # -- commands as the cluster's owner --------------------------------------------------------

    def _cmd(self, args: list[str]) -> list[str]:
        if self.as_postgres:
            return [*self.prefix, runuser(), "-u", "postgres", "--", *args]
        return [*self.prefix, *args]

    def run(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self._cmd(args), capture_output=True, text=True, timeout=120, cwd="/")
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc

    @classmethod
    def start(
        cls, root: Path, listen: str = "127.0.0.1", prefix: list[str] | None = None
    ) -> PgServer:
        root.mkdir(parents=True, exist_ok=True)
        server = cls(root, free_port(), listen, prefix)
        if server.as_postgres:
            shutil.chown(root, "postgres", "postgres")
            os.chmod(root, 0o700)
            # the folders above must let postgres through to its cluster
            for parent in root.parents:
                if parent == Path("/"):
                    break
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    os.chmod(parent, mode | 0o001)
        pwfile = root / "pw"
        pwfile.write_text("postgres-superuser\n")
        if server.as_postgres:
            shutil.chown(pwfile, "postgres", "postgres")
        server.run(
            [
                str(server.bin / "initdb"),
                "-D",
                str(server.data),
                "-U",
                "postgres",
                "--pwfile",
                str(pwfile),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ]
        )
        with open(server.data / "postgresql.conf", "a") as f:
            f.write(
                f"listen_addresses = '{listen}'\nport = {server.port}\n"
                f"unix_socket_directories = '{root}'\nmax_connections = 200\n"
                # the cluster lives in a temp dir for one run: fsync is the host disk's
                # business here, not the test's (durability is PostgreSQL's own, tested by
                # the crash campaign with the server killed, not the machine)
                "fsync = off\nfull_page_writes = off\n"
            )
        with open(server.data / "pg_hba.conf", "a") as f:
            f.write("host all all 0.0.0.0/0 scram-sha-256\n")
        server.restart()
        server.psql(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
        server.psql(f"CREATE DATABASE {DATABASE} OWNER {USER}")
        return server

    def psql(self, sql: str, database: str = "postgres") -> str:
        proc = self.run(
            [
                str(self.bin / "psql"),
                "-h",
                str(self.root),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ]
        )
        return proc.stdout

    def socket_url(self, database: str = DATABASE) -> str:
        """A URL through the server's Unix socket (local connections are trusted): reaches a
        server in another network namespace too."""
        host = quote(str(self.root), safe="")
        return f"postgresql://{USER}@/{database}?host={host}&port={self.port}"

    def url(self, database: str = DATABASE, password: str = PASSWORD, host: str = "") -> str:
        return (
            f"postgresql://{USER}:{quote(password, safe='')}@{host or self.listen}:{self.port}"
            f"/{database}"
        )

    # -- life ----------------------------------------------------------------------------------

    def restart(self) -> None:
        if self.running():
            self.stop()
        self.run(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.root / "log"),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )

    def stop(self, mode: str = "fast") -> None:
        self.run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def running(self) -> bool:
        proc = self.run([str(self.bin / "pg_ctl"), "-D", str(self.data), "status"], check=False)
        return proc.returncode == 0

    def remove(self) -> None:
        if self.running():
            self.run(
                [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                check=False,
            )
        # wait for the postmaster to let go of the folder before removing it
        for _ in range(50):
            if not (self.data / "postmaster.pid").exists():
                break
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
