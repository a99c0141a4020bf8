"""Testing helpers: a real embedded server, and `drain` to run an app's jobs in-process.

No mocks: pyqueue is embedded, so tests can afford the real thing.

    from pyqueue.testing import drain, embedded_server

    def test_signup_sends_mail():
        with embedded_server() as address:
            app.address = address
            signup("ada@example.com")            # enqueues send_email
            result = drain(app)
            assert [j.type for j in result.ran] == ["myapp.tasks.send_email"]

With pytest, `pytest_plugins = ["pyqueue.testing"]` gives the `pyqueue_server` fixture (an address).
"""

import asyncio
import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyqueue.app import App
from pyqueue.children import child_environment, pyqueue_command
from pyqueue.client import Client, Job
from pyqueue.errors import PyQueueError
from pyqueue.worker.execute import execute, thread_runner
from pyqueue.worker.threads import HandlerThreads

_LISTENING = re.compile(r"listening on \S+:(\d+)")
_PUBLIC = re.compile(r"supervisor: pyqueue listening on \S+:(\d+)")


@contextlib.contextmanager
def embedded_server(
    data_dir: str | os.PathLike[str] | None = None, *args: str, timeout: float = 30.0
) -> Iterator[str]:
    """Run `pyqueue serve` on a free loopback port (and a temporary data dir); yield its address."""
    with tempfile.TemporaryDirectory(prefix="pyqueue-test-") as tmp:
        data = Path(data_dir) if data_dir is not None else Path(tmp) / "data"
        proc = subprocess.Popen(
            pyqueue_command(
                "serve",
                "--data-dir",
                str(data),
                "--listen",
                "127.0.0.1:0",
                *(() if "--shards" in args else ("--shards", "1")),
                *(() if "--http-listen" in args else ("--http-listen", "")),  # no fixed port to clash on
                *args,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=child_environment(),
        )
        sharded = "--shards" in args and int(args[list(args).index("--shards") + 1]) > 1
        port = _wait_for_port(proc, timeout, _PUBLIC if sharded else _LISTENING)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_for_port(proc: "subprocess.Popen[str]", timeout: float, pattern: "re.Pattern[str]") -> int:
    """The port from the first line matching `pattern` (a supervisor's own line: its shards' come first)."""
    found: list[int] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = pattern.search(line)
            if match and not found:
                found.append(int(match.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout) or not found:
        proc.kill()
        raise RuntimeError("the embedded pyqueue server did not start")
    return found[0]


@dataclass
class DrainResult:
    ran: list[Job] = field(default_factory=list)
    failed: list[tuple[Job, BaseException]] = field(default_factory=list)


_drain_threads: HandlerThreads | None = None


def drain(app: App, queues: list[str] | None = None, *, idle_s: float = 0.2) -> DrainResult:
    """Run the app's job functions in this process until its queues have no ready job left.

    The worker's rules hold (see pyqueue/worker/execute.py): each attempt runs under its job's
    time limit, failures are reported to the server (and returned), and a job whose type the app
    lacks is handed back without an attempt (and returned as failed with a LookupError). Jobs
    scheduled for later (including retries) are not waited for."""
    global _drain_threads
    if _drain_threads is None:
        # Not the loop's default executor: asyncio.run would wait for an abandoned thread. One
        # job runs at a time; each handler abandoned past its limit keeps a thread of its own.
        _drain_threads = HandlerThreads(1000, name="pyqueue-drain")
    names = queues or app.queues or ["default"]
    result = DrainResult()
    with Client(app.address) as client, client.take(names, prefetch=1) as stream:
        while True:
            job = stream.next(timeout=idle_s, confirm_start=True)
            if job is None:
                if client.count_jobs(queues=names, status="ready") == 0:
                    return result
                continue
            function = app.resolve(job.type)
            if function is None:
                result.failed.append((job, LookupError(f"no job function named {job.type!r}")))
                job.release(delay=30)
                continue
            outcome = asyncio.run(execute(thread_runner(function, _drain_threads), job))
            with contextlib.suppress(PyQueueError):  # refused: the server ended the attempt first
                if outcome.failed:
                    assert outcome.error is not None
                    result.failed.append((job, outcome.error))
                    job.fail(
                        outcome.message,
                        kill=outcome.kind == "kill",
                        error_type=outcome.error_type,
                        backtrace=outcome.backtrace,
                        retry_at=datetime.fromtimestamp(outcome.retry_at_ms / 1000, UTC)
                        if outcome.retry_at_ms
                        else None,
                    )
                else:
                    result.ran.append(job)
                    job.ack(json.loads(outcome.result) if outcome.result else None)


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional
    pass
else:

    @pytest.fixture
    def pyqueue_server() -> Iterator[str]:
        """The address of a fresh embedded pyqueue server."""
        with embedded_server() as address:
            yield address
