"""Real server processes for tests: start, SIGTERM, SIGKILL, restart; all on loopback."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_LISTENING = re.compile(r"listening on (\S+):(\d+)")


class ServerProcess:
    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        # One process unless a test asks for shards (the product's default is one per CPU).
        self.args = list(args) if "--shards" in args else ["--shards", "1", *args]
        self.env = env or {}
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.command = [sys.executable, "-m", "pyqueue"]
        self.cwd: Path | None = None
        self.lines: list[str] = []
        self._seen = threading.Condition()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        cmd = [
            *self.command,
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.args,
        ]
        self.lines = []
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **self.env},
            cwd=self.cwd,
        )
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
        # A supervisor relays its shards' lines too: its own line is the public address.
        sharded = int(self.args[self.args.index("--shards") + 1]) > 1
        try:
            line = self.wait_for("supervisor: pyqueue listening on" if sharded else "listening on", timeout)
        except AssertionError:
            self.close()  # never leak a server whose start failed
            raise
        match = _LISTENING.search(line)
        assert match, line
        self.port = int(match.group(2))
        return self

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._seen:
                self.lines.append(line)
                self._seen.notify_all()
        with self._seen:
            self._seen.notify_all()

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """Block until the server logs a line containing `text` (a signal, not a sleep)."""

        def found() -> str | None:
            return next((line for line in self.lines if text in line), None)

        with self._seen:
            ok = self._seen.wait_for(
                lambda: found() is not None or (self.proc is not None and self.proc.poll() is not None),
                timeout,
            )
            line = found()
        if line is None:
            raise AssertionError(f"server never logged {text!r} (ok={ok}); output:\n{''.join(self.lines)}")
        return line

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def restart(self, timeout: float = 30.0) -> "ServerProcess":
        return self.start(timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_status(client, job_id: int, status: str, timeout: float = 20) -> bool:  # type: ignore[no-untyped-def]
    """Poll a job's status until it is `status` (for effects of another process: a worker, a purge)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get_job(job_id).status == status:
            return True
        time.sleep(0.05)
    return False


def wait_gone(client, job_id: int, timeout: float = 20) -> bool:  # type: ignore[no-untyped-def]
    """Poll until the job no longer exists (completed and deleted, or purged)."""
    import pyqueue

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.get_job(job_id)
        except pyqueue.NotFound:
            return True
        time.sleep(0.05)
    return False


def assert_nothing_else_comes(client, stream, queue: str = "default") -> None:  # type: ignore[no-untyped-def]
    """Absence by a positive signal: a marker job enqueued now, last in priority, must be the next
    job the stream gets; anything deliverable before it would have come first."""
    marker = client.enqueue("marker", queue=queue, priority=65535).id
    job = stream.next(timeout=30)
    assert job is not None, "not even the marker came"
    assert job.id == marker, f"job {job.id} ({job.type}) came before the marker"
    job.ack()


def pyqueue_command(*args: str, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
    """`python -m pyqueue ARGS`, run to its end (for commands that exit: check, a refused serve)."""
    return subprocess.run(
        [sys.executable, "-m", "pyqueue", *args], capture_output=True, text=True, timeout=timeout
    )


def check_store(data_dir: Path) -> "subprocess.CompletedProcess[str]":
    return pyqueue_command("check", "--data-dir", str(data_dir), timeout=120)


def serve_once(data_dir: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    """A `pyqueue serve` expected to refuse to start (it would otherwise run until the timeout)."""
    return pyqueue_command("serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *args)
