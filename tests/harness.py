"""Real server processes for tests: start, SIGTERM, SIGKILL, restart; all on loopback."""

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_SPEC = importlib.util.find_spec("pyqueue")
# The checkout whose pyqueue this process imports. Servers start there, and the benchmarks' workers
# run it: `python -m` puts its working directory first on sys.path, so a benchmark run from one
# checkout against another's code (a worktree, with PYTHONPATH) would otherwise start the server of
# the checkout it was run from.
PYQUEUE_ROOT = Path(_SPEC.origin).resolve().parent.parent if _SPEC and _SPEC.origin else None


class ProcessOutput:
    """A process's merged output, read on a thread as it comes: a test waits on a line (a signal,
    not a sleep) and still has all of it at the end."""

    def __init__(self, proc: "subprocess.Popen[str]") -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.ended = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def wait_lines(self, text: str, count: int = 1, timeout: float = 30.0) -> list[str]:
        """The lines containing `text`, once there are `count` of them; AssertionError (with the
        output) if the output ends or the timeout passes first."""

        def matching() -> list[str]:
            return [line for line in self.lines if text in line]

        with self._changed:
            self._changed.wait_for(lambda: len(matching()) >= count or self.ended, timeout)
            found = matching()
        if len(found) < count:
            raise AssertionError(f"{count} x {text!r} not in the output:\n{''.join(self.lines)}")
        return found

    def finish(self, timeout: float = 60.0) -> str:
        """Wait for the process to exit and its output to end; all of it."""
        self.proc.wait(timeout)
        self._thread.join(timeout)
        return "".join(self.lines)


class ServerProcess:
    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        # One process unless a test asks for shards (the product's default is one per CPU).
        self.args = list(args) if "--shards" in args else ["--shards", "1", *args]
        if "--http-listen" not in self.args:  # the default port would clash between test servers
            self.args += ["--http-listen", "127.0.0.1:0"]
        self.env = env or {}
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.command = [sys.executable, "-m", "pyqueue"]
        self.cwd: Path | None = PYQUEUE_ROOT
        self.output: ProcessOutput | None = None

    @property
    def lines(self) -> list[str]:
        """What the server (and, sharded, its shards) logged since its last start."""
        return self.output.lines if self.output is not None else []

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
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **self.env},
            cwd=self.cwd,
        )
        self.output = ProcessOutput(self.proc)
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

    @property
    def http_address(self) -> str:
        """Where /metrics and /healthz are served (the server logs it once listening)."""
        line = self.wait_for("http listening on")
        return line.split("http listening on ", 1)[1].split()[0]

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """Block until the server logs a line containing `text` (a signal, not a sleep)."""
        assert self.output is not None
        return self.output.wait_lines(text, 1, timeout)[0]

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


def wait_started(client, job_ids: set[int], timeout: float = 30) -> bool:  # type: ignore[no-untyped-def]
    """Poll until the server has recorded a start for every job (its worker is another process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(client.get_job(i).started_at is not None for i in job_ids):
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
        except pyqueue.Unavailable:
            pass  # the server is restarting: a read is not sent again by the client, so ask again
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


def queue_on(topology, shard: int) -> str:  # type: ignore[no-untyped-def]
    """A queue name that shard `shard` of `topology` owns."""
    return next(f"q{i}" for i in range(1000) if topology.shard_of_queue(f"q{i}") == shard)


def children(pid: int) -> list[int]:
    """The processes `pid` started (from any of its threads: the supervisor starts shards from a pool)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def json_call(url: str, body: bytes | None = None, kind: str = "application/json") -> tuple[int, Any]:
    """An HTTP API's answer: (status, its JSON); a body makes it a POST of that content type."""
    method = "POST" if body is not None else "GET"
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": kind})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
