"""Job functions and `pyqueue worker` against a real server."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import ProcessOutput, ServerProcess, wait_gone, wait_status

import pyqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import sample_app  # noqa: E402


def start_worker(
    server: ServerProcess, log: Path, *args: str, target: str = "sample_app:app"
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYQUEUE_ADDRESS": server.address, "SAMPLE_LOG": str(log)}
    return subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", target, *args],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_lines(log: Path, n: int, timeout: float = 20) -> list[str]:
    # The worker is another process; its log file is what this test can observe.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= n:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"only {log.read_text() if log.exists() else ''!r} after {timeout}s")


def test_names_signatures_and_options(app: pyqueue.App, client: pyqueue.Client) -> None:
    assert sample_app.add.name == "sample_app.add"
    with pytest.raises(TypeError, match=r"sample_app.add.*missing a required argument: 'b'"):
        sample_app.add.enqueue(1)
    with pytest.raises(TypeError, match="JSON"):
        sample_app.add.enqueue(1, object())  # type: ignore[arg-type]
    job = sample_app.add.options(priority=5, delay=600).enqueue(1, b=2)
    stored = client.get_job(job.id)
    assert (stored.type, stored.queue, stored.priority, stored.status) == (
        "sample_app.add",
        "work",
        5,
        "scheduled",
    )
    assert stored.payload == {"args": [1], "kwargs": {"b": 2}}
    assert sample_app.add(2, 3) == 5  # calling the function still runs it here


def test_worker_runs_sync_and_async_handlers_and_reports_failures(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    ok = [sample_app.add.enqueue(2, 3), sample_app.greet.enqueue("ada")]
    boom = sample_app.explode.enqueue("bad input")
    dead = sample_app.kill_me.enqueue()
    later = sample_app.again_soon.enqueue()
    worker = start_worker(server, log, "--concurrency", "4")
    try:
        assert sorted(wait_for_lines(log, 2)) == ["add 5", "greet ada"]
        for job in ok:
            assert wait_gone(client, job.id)
        assert wait_status(client, boom.id, "scheduled")
        (error,) = client.job_errors(boom.id)
        assert (error.error_type, error.message) == (
            "ValueError",
            "bad input",
        ) and "raise ValueError" in error.backtrace
        assert wait_status(client, dead.id, "dead")
        assert client.job_errors(dead.id)[0].message == "not worth retrying"
        assert wait_status(client, later.id, "scheduled")
        run_at = client.get_job(later.id).run_at
        assert run_at is not None and run_at.timestamp() > time.time() + 3000
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, out
    assert "worker stopped" in out


def test_an_app_of_async_handlers_runs_fifty_at_once_by_default(client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # 30 jobs that each wait for all 30 to be running: they finish only if the worker runs more
    # than the sync default (10) at once.
    log = tmp_path / "ran.log"
    spec = {"type": "async_app.together", "payload": {"args": [30], "kwargs": {}}, "queue": "together"}
    client.enqueue_many([spec] * 30)
    worker = start_worker(server, log, "--grace", "5", target="async_app:app")  # a short grace if stuck
    try:
        assert wait_for_lines(log, 30, timeout=60) == ["together 30"] * 30
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    assert "with concurrency 50 (thread pool)" in out, out


def test_a_slot_that_may_be_a_thread_or_a_process_keeps_the_default_of_ten(client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    def started_with(*args: str, target: str) -> str:
        worker = start_worker(server, tmp_path / "ran.log", *args, target=target)
        try:
            deadline = time.monotonic() + 30
            while not client.workers():  # listed: its stream is open, and it logged its start before
                assert time.monotonic() < deadline, "the worker never connected"
                time.sleep(0.05)
        finally:
            worker.send_signal(signal.SIGTERM)
            out, _ = worker.communicate(timeout=30)
        return out

    assert "with concurrency 10 (thread pool)" in started_with(target="sample_app:app")  # sync and async
    assert "with concurrency 10 (process pool)" in started_with("--pool", "process", target="async_app:app")
    assert "with concurrency 3 (thread pool)" in started_with("--concurrency", "3", target="async_app:app")


def test_a_worker_with_no_slot_is_refused() -> None:
    from pyqueue.worker import Worker, WorkerConfig

    with pytest.raises(ValueError, match="concurrency must be at least 1, not -1"):
        Worker(pyqueue.App(), WorkerConfig(concurrency=-1))


def test_the_time_limit_counts_from_the_start_not_the_delivery(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # One at a time, 0.6 s each, a limit of 1.5 s: the fourth waits 1.8 s in the prefetch before
    # it starts, and must still complete on its first attempt.
    log = tmp_path / "ran.log"
    jobs = [sample_app.within_limit.enqueue(n, 0.6) for n in range(4)]
    worker = start_worker(server, log, "--concurrency", "1")
    try:
        assert wait_for_lines(log, 4) == [f"within {n}" for n in range(4)]
        for job in jobs:
            assert wait_gone(client, job.id)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=30)
    assert "failed" not in out.replace("0 failed", "")


def test_sigterm_lets_running_jobs_finish(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    job = sample_app.linger.enqueue(1.0)
    worker = start_worker(server, log, "--grace", "10")
    assert wait_for_lines(log, 1) == ["linger started"]
    worker.send_signal(signal.SIGTERM)
    out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, out
    assert log.read_text().splitlines() == ["linger started", "linger done"]
    assert wait_gone(client, job.id)


def test_worker_reconnects_when_the_server_restarts(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    worker = start_worker(server, log)
    output = ProcessOutput(worker)
    try:
        first = sample_app.add.enqueue(1, 1)
        assert wait_for_lines(log, 1) == ["add 2"]
        assert wait_gone(client, first.id)  # acked before the server stops
        server.stop()
        output.wait_lines("reconnecting in 0.8s")  # a long outage: the backoff has grown
        server.restart()  # same port
        with pyqueue.Client(server.address) as fresh:
            fresh.enqueue("sample_app.add", {"args": [2, 2], "kwargs": {}}, queue="work")
            assert wait_for_lines(log, 2, timeout=30)[1] == "add 4"
            output.wait_lines("connected to the server again after")
            # The next restart (a deploy) starts the backoff over, not at the last outage's delay.
            lost = len(output.wait_lines("lost the server"))
            server.stop()
            again = output.wait_lines("lost the server", lost + 1)[lost]
            assert "reconnecting in 0.1s" in again, again
        server.restart()
        with pyqueue.Client(server.address) as fresh:
            fresh.enqueue("sample_app.add", {"args": [3, 3], "kwargs": {}}, queue="work")
        assert wait_for_lines(log, 3, timeout=30)[2] == "add 6"
    finally:
        worker.send_signal(signal.SIGTERM)
        out = output.finish(timeout=30)
    assert out.count("connected to the server again after") == 2, out


def test_drain_runs_jobs_in_process(app: pyqueue.App, client: pyqueue.Client) -> None:
    from pyqueue.testing import drain

    sample_app.add.enqueue(3, 4)
    sample_app.greet.enqueue("bob")
    sample_app.explode.enqueue("nope")
    result = drain(app)
    assert sorted(j.type for j in result.ran) == ["sample_app.add", "sample_app.greet"]
    assert [(j.type, str(e)) for j, e in result.failed] == [("sample_app.explode", "nope")]
    assert sorted(sample_app.LOG.read_text().splitlines()) == ["add 7", "greet bob"]


def test_embedded_server_helper() -> None:
    from pyqueue.testing import embedded_server

    with embedded_server() as address, pyqueue.Client(address) as c:
        assert c.get_job(c.enqueue("t").id).status == "ready"


def test_concurrent_enqueues_are_batched(app: pyqueue.App, client: pyqueue.Client) -> None:
    import threading

    barrier = threading.Barrier(32)

    def one(i: int) -> None:
        barrier.wait()
        sample_app.noop.enqueue()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert client.count_jobs(type="sample_app.noop") == 32
    assert app.client.enqueue_calls < 32


def test_enqueue_many_checks_every_call_then_sends_one_request(
    app: pyqueue.App, client: pyqueue.Client
) -> None:
    with pytest.raises(TypeError, match="missing a required argument: 'b'"):
        sample_app.add.enqueue_many([(1, 2), (3,)])
    assert client.count_jobs() == 0, "nothing was sent"
    calls_before = app.client.enqueue_calls
    jobs = sample_app.add.options(priority=7).enqueue_many([(1, 2), {"a": 3, "b": 4}, [5, 6]])
    assert [client.get_job(j.id).payload for j in jobs] == [
        {"args": [1, 2], "kwargs": {}},
        {"args": [], "kwargs": {"a": 3, "b": 4}},
        {"args": [5, 6], "kwargs": {}},
    ]
    assert {client.get_job(j.id).priority for j in jobs} == {7}
    assert app.client.enqueue_calls == calls_before, "one Enqueue, not through the single-job batcher"


def test_queues_are_chosen_by_list_or_by_repeating_the_option(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`--queues a,b`, `--queue a --queue b` and `-Q a -Q b` alike (Celery and Dramatiq users type
    the last two); a queue left out is not served."""
    log = tmp_path / "ran.log"
    for n, queue in enumerate(["first", "second", "third"]):
        sample_app.add.options(queue=queue).enqueue(n, 100)
    left_out = sample_app.add.options(queue="left-out").enqueue(0, 0)
    worker = start_worker(server, log, "--queue", "first", "-Q", "second", "--queues", "third,first")
    try:
        assert sorted(wait_for_lines(log, 3)) == ["add 100", "add 101", "add 102"]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
    assert client.get_job(left_out.id).status == "ready"
