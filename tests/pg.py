"""A real PostgreSQL server for a test, from Debian's `postgresql` package (.ci/run installs it):
a fresh cluster in its own temp directory, listening on loopback on a free port, fsync on (the
package's defaults), stopped and removed afterwards. As root it runs as the `postgres` user,
since PostgreSQL refuses to run as root."""

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin directory, if any."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self) -> None:
        bin_dir = binaries()
        assert bin_dir is not None, "no PostgreSQL: apt-get install postgresql (.ci/run does)"
        self.bin = bin_dir
        # Not under pytest's tmp_path: the postgres user must be able to reach it.
        self.root = Path(tempfile.mkdtemp(prefix="pyqueue-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user = "pyqueue"
        self.database = "app"

    def url(self, database: str | None = None) -> str:
        """A URL of one of its databases, as `pyqueue relay --database` takes it (psycopg 3)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database or self.database}"

    def new_database(self, name: str) -> str:
        """A fresh database of its own for one test; its URL."""
        self._psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def _psql(self, sql: str) -> None:
        self._run(
            str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres",
            "-qAt", "-c", sql,
        )  # fmt: skip

    def _run(self, *argv: str, timeout: float = 120) -> None:
        command = list(argv)
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{argv[0]} failed: {done.stdout}\n{done.stderr}"

    def start(self) -> "PostgresServer":
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8",
            "--no-locale",
        )  # fmt: skip
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{self.root}'\n"
            )
        self.restart()
        self._psql(f"CREATE DATABASE {self.database}")
        return self

    def restart(self) -> None:
        self._pg_ctl("-l", str(self.root / "log"), "-t", "60", "start")

    def crash(self) -> None:
        """Stop at once, as a power cut would (the next start recovers from the WAL)."""
        self._pg_ctl("-m", "immediate", "stop")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.crash()
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, *argv: str) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", *argv)
