"""Trace context across the queue (OpenTelemetry installed): the job carries the caller's context,
and the handler runs in a consumer span that continues the trace and links to the caller's span,
with `pyqueue worker` (sync and async handlers) and with `drain()`."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import ServerProcess
from opentelemetry import trace

import pyqueue
from pyqueue.testing import drain

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import traced_app  # noqa: E402  (sets the SDK tracer provider of this process too)


def lines(log: Path, n: int, timeout: float = 30) -> list[dict]:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while True:
        found = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        if len(found) >= n:
            return found
        assert time.monotonic() < deadline, f"only {len(found)} of {n} handlers ran"
        time.sleep(0.05)


def test_pyqueue_worker_runs_handlers_in_the_callers_trace(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    log = tmp_path / "trace.log"
    traced_app.app.address = server.address
    tracer = trace.get_tracer("test")
    try:
        with tracer.start_as_current_span("web request") as request:
            traced_app.sync_handler.enqueue()
            traced_app.async_handler.enqueue()
        with pyqueue.Client(server.address) as client:
            (job, *_) = client.list_jobs(queue="traced")
            assert job.headers["traceparent"].split("-")[1] == format(
                request.get_span_context().trace_id, "032x"
            )
        worker = subprocess.Popen(
            [sys.executable, "-m", "pyqueue", "worker", "traced_app:app"],
            cwd=HERE,
            env={**os.environ, "PYQUEUE_ADDRESS": server.address, "TRACE_LOG": str(log)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            ran = lines(log, 2)
        finally:
            worker.terminate()
            worker.communicate(timeout=60)
        context = request.get_span_context()
        assert {r["handler"] for r in ran} == {"sync", "async"}
        for r in ran:
            assert r["trace_id"] == context.trace_id, r
            assert r["parent"] == context.span_id and r["links"] == [context.span_id], r
            assert r["name"] == "traced process" and r["kind"] == "SpanKind.CONSUMER", r
    finally:
        traced_app.app.close()
        server.close()


def test_drain_runs_handlers_in_the_callers_trace_and_without_one_in_a_new_trace(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    traced_app.LOG = tmp_path / "trace.log"
    traced_app.app.address = server.address
    tracer = trace.get_tracer("test")
    try:
        with tracer.start_as_current_span("cli command") as command:
            traced_app.sync_handler.enqueue()
        traced_app.sync_handler.enqueue()  # no span around: a new trace, with no link
        drain(traced_app.app)
        first, second = lines(traced_app.LOG, 2)
        assert first["trace_id"] == command.get_span_context().trace_id
        assert first["links"] == [command.get_span_context().span_id]
        assert (
            second["trace_id"] not in (0, first["trace_id"])
            and second["links"] == []
            and second["parent"] is None
        )
    finally:
        traced_app.app.close()
        server.close()


def test_without_opentelemetry_jobs_carry_no_trace_and_run_as_before(tmp_path: Path) -> None:
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if the extra were not installed
import pyqueue
from pyqueue import tracing
from pyqueue.testing import drain, embedded_server
assert not tracing.ENABLED
app = pyqueue.App()
ran = []
@app.job()
def work() -> None:
    ran.append(1)
with embedded_server() as address:
    app.address = address
    work.enqueue()
    with pyqueue.Client(address) as client:
        assert next(iter(client.list_jobs())).headers == {}
    drain(app)
    app.close()
assert ran == [1]
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_with_opentelemetry_but_no_sdk_a_job_without_a_trace_gets_no_span(tmp_path: Path) -> None:
    """No SDK and nothing to continue: no span is made (it would be a no-op that costs a no-op job
    a tenth of its worker time). A job that carries a trace still runs in its context, so the
    handler's own calls pass it on."""
    script = """
from types import SimpleNamespace
from opentelemetry import trace
from pyqueue import tracing
assert tracing.ENABLED and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
with tracing.handling(SimpleNamespace(headers={})) as span:
    assert span is None
parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
job = SimpleNamespace(headers={"traceparent": parent}, queue="q", id=1, type="t", attempts=1)
with tracing.handling(job) as span:
    assert span is not None
    assert trace.get_current_span().get_span_context().trace_id == int(parent.split("-")[1], 16)
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_no_sdk_is_asked_once_a_second_and_a_provider_set_later_is_used(tmp_path: Path) -> None:
    """Asking opentelemetry for its provider reads the environment: the answer "no SDK" is kept
    for SDK_CHECK_EVERY_S, so a crowd of jobs asks once; a provider set while the worker runs is
    used from the next check on."""
    script = """
from types import SimpleNamespace
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from pyqueue import tracing
asked = [0]
real = trace.get_tracer_provider
def counted():
    asked[0] += 1
    return real()
trace.get_tracer_provider = counted
now = [1000.0]
tracing.clock = lambda: now[0]
job = SimpleNamespace(headers={}, queue="q", id=1, type="t", attempts=1)
assert not any(tracing.wanted(job) for _ in range(1000))
assert asked[0] == 1, asked
trace.set_tracer_provider(TracerProvider())
now[0] += tracing.SDK_CHECK_EVERY_S / 2
assert not tracing.wanted(job) and asked[0] == 1  # the kept answer holds until it runs out
now[0] += tracing.SDK_CHECK_EVERY_S
assert tracing.wanted(job) and asked[0] == 2
with tracing.handling(job) as span:
    assert span is not None
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
