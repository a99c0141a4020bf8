"""The Sentry integration with the real sentry-sdk, sending to a local HTTP endpoint this test runs:
each job run in `pyqueue worker` is a transaction named by the job's type that continues the
enqueuing request's trace, with the job's tags; an exception is reported once when the job dies
(the default), or on every failed attempt."""

import gzip
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness import ServerProcess

import pyqueue

HERE = Path(__file__).parent


class Collector:
    """A Sentry ingest endpoint: keeps every item of every envelope it is sent."""

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                coding = self.headers.get("Content-Encoding", "")
                if coding == "gzip":
                    body = gzip.decompress(body)
                elif coding == "deflate":
                    body = zlib.decompress(body)
                collector.add(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.dsn = f"http://public@127.0.0.1:{self.server.server_address[1]}/1"

    def add(self, envelope: bytes) -> None:
        lines = envelope.split(b"\n")[1:]  # after the envelope's own header
        with self.lock:
            for header, payload in zip(lines[::2], lines[1::2], strict=False):
                if header.strip():
                    self.items.append((json.loads(header), json.loads(payload) if payload.strip() else {}))

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [payload for header, payload in self.items if header.get("type") == kind]

    def wait(self, what: str, ready: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            assert time.monotonic() < deadline, f"{what}: got {[h.get('type') for h, _ in self.items]}"
            time.sleep(0.05)


@pytest.fixture
def collector() -> Iterator[Collector]:
    found = Collector()
    yield found
    found.server.shutdown()


def _run(server: ServerProcess, collector: Collector, report: str) -> str:
    env = {
        **os.environ,
        "SENTRY_DSN": collector.dsn,
        "SENTRY_REPORT": report,
        "PYQUEUE_ADDRESS": server.address,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    web = subprocess.run(
        [sys.executable, str(HERE / "sentry_app.py"), server.address],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    trace_id = web.stdout.split()[-1]
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "sentry_app:app"], cwd=HERE, env=env, text=True
    )
    try:
        with pyqueue.Client(server.address) as client:
            deadline = time.monotonic() + 60
            while client.count_jobs(queue="sentry", status="dead") < 1 or client.count_jobs(
                queue="sentry", status="ready"
            ):
                assert time.monotonic() < deadline, "the jobs did not run"
                time.sleep(0.05)
        collector.wait("three job transactions", lambda: len(_jobs(collector)) >= 3)
    finally:
        worker.terminate()
        worker.wait(60)
    return trace_id


def _jobs(collector: Collector) -> list[dict[str, Any]]:
    return [t for t in collector.of("transaction") if t["contexts"]["trace"].get("op") == "queue.process"]


def test_each_run_is_a_transaction_in_the_enqueuer_s_trace_and_a_death_is_reported_once(
    tmp_path: Path, collector: Collector
) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        trace_id = _run(server, collector, "dies")
        runs = sorted(_jobs(collector), key=lambda t: (t["transaction"], t["tags"]["pyqueue.attempt"]))
        assert [(t["transaction"], t["tags"]["pyqueue.attempt"]) for t in runs] == [
            ("sentry_app.fails", "1"),
            ("sentry_app.fails", "2"),
            ("sentry_app.works", "1"),
        ]
        for run in runs:
            assert run["contexts"]["trace"]["trace_id"] == trace_id, "the trace continues from the request"
            assert run["transaction_info"]["source"] == "task"
            assert run["tags"]["pyqueue.queue"] == "sentry"
            assert run["tags"]["pyqueue.worker"].endswith(tuple("0123456789"))
        assert [t["contexts"]["trace"]["status"] for t in runs] == ["internal_error", "internal_error", "ok"]
        assert [t["tags"]["pyqueue.status"] for t in runs] == ["scheduled", "dead", "completed"]
        web = [t for t in collector.of("transaction") if t["transaction"] == "POST /orders"]
        assert len(web) == 1 and web[0]["contexts"]["trace"]["trace_id"] == trace_id
        (error,) = collector.of("event")
        (exception,) = error["exception"]["values"]
        assert (exception["type"], exception["value"]) == ("ValueError", "boom 2")
        assert exception["mechanism"] == {"type": "pyqueue", "handled": False}
        assert error["tags"]["pyqueue.attempt"] == "2", "reported when the job died, on its last attempt"
        assert error["contexts"]["trace"]["trace_id"] == trace_id
        crumbs = [c["message"] for c in error["breadcrumbs"]["values"] if c.get("message")]
        assert "failing on 2" in crumbs and "working on 1" not in crumbs, "a scope per job"
    finally:
        server.close()


def test_every_attempt_reports_each_failure(tmp_path: Path, collector: Collector) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        _run(server, collector, "every_attempt")
        collector.wait("two error events", lambda: len(collector.of("event")) >= 2)
        errors = collector.of("event")
        assert sorted(e["tags"]["pyqueue.attempt"] for e in errors) == ["1", "2"]
        assert {e["exception"]["values"][0]["value"] for e in errors} == {"boom 2"}
    finally:
        server.close()


def test_a_bad_report_mode_is_refused() -> None:
    from pyqueue.contrib.sentry import PyqueueIntegration

    with pytest.raises(ValueError, match="dies, every_attempt"):
        PyqueueIntegration(report="sometimes")
