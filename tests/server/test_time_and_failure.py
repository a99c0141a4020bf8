"""Scheduled jobs, retries, dead jobs, leases and retention through a real server."""

import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta

import pytest
from harness import ServerProcess, wait_gone

import pyqueue

QUICK = (0.2, 0.0, 0.0)  # backoff: 1 + 0.2 s, so retries come quickly


def test_scheduled_job_waits_for_its_time(client: pyqueue.Client) -> None:
    job = client.enqueue("t", delay=1.0)
    assert client.get_job(job.id).status == "scheduled"
    with client.take("default") as stream:
        got = stream.next(timeout=30)
        assert got is not None and got.id == job.id
        assert datetime.now(UTC) >= job_created_plus(client, got, 1.0)
        got.ack()


def job_created_plus(client: pyqueue.Client, job: pyqueue.Job, seconds: float) -> datetime:
    assert job.created_at is not None
    return job.created_at + timedelta(seconds=seconds) - timedelta(milliseconds=5)


def test_an_earlier_job_enqueued_while_the_scheduler_sleeps_runs_first(client: pyqueue.Client) -> None:
    late = client.enqueue("t", delay=60)
    soon = client.enqueue("t", run_at=datetime.now(UTC) + timedelta(seconds=0.5))
    with client.take("default") as stream:
        got = stream.next(timeout=30)
        assert got is not None and got.id == soon.id
        got.ack()
    assert client.get_job(late.id).status == "scheduled"


def test_scheduled_jobs_survive_a_restart(server: ServerProcess) -> None:
    delay = 4.0
    enqueued = time.monotonic()
    with pyqueue.Client(server.address) as client:
        job_id = client.enqueue("t", delay=delay).id
    server.stop()
    server.restart()
    with pyqueue.Client(server.address) as client:
        status = client.get_job(job_id).status
        # A restart slower than the delay (a loaded machine) may already find the job due.
        assert status == "scheduled" or (status == "ready" and time.monotonic() - enqueued >= delay)
        with client.take("default") as stream:
            got = stream.next(timeout=10)
            assert got is not None and got.id == job_id


def test_failure_then_retry_then_success(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t", backoff=QUICK).id
    with client.take("default") as stream:
        first = stream.next(timeout=30)
        assert first is not None
        assert first.fail("flaky", error_type="IOError") == "scheduled"
        assert client.get_job(job_id).status == "scheduled"
        second = stream.next(timeout=30)
        assert second is not None and second.id == job_id and second.attempts == 2
        second.ack()
    with pytest.raises(pyqueue.NotFound):
        client.get_job(job_id)


def test_failing_until_dead_keeps_the_history_in_order(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t", max_retries=1, backoff=QUICK).id
    statuses = []
    with client.take("default") as stream:
        for attempt in (1, 2):
            job = stream.next(timeout=30)
            assert job is not None
            statuses.append(
                job.fail(f"failure {attempt}", error_type="RuntimeError", backtrace=f"line {attempt}")
            )
    assert statuses == ["scheduled", "dead"]
    assert client.get_job(job_id).status == "dead"
    history = client.job_errors(job_id)
    assert [(e.attempt, e.kind, e.message, e.backtrace) for e in history] == [
        (1, "error", "failure 1", "line 1"),
        (2, "error", "failure 2", "line 2"),
    ]


def test_kill_makes_a_job_dead_at_once(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t").id
    with client.take("default") as stream:
        job = stream.next(timeout=30)
        assert job is not None
        assert job.fail("bad input", kill=True) == "dead"
    dead = client.get_job(job_id)
    assert dead.status == "dead" and dead.errors == 1 and dead.expires_at is not None
    assert client.job_errors(job_id)[0].message == "bad input"


def test_retry_at_overrides_the_backoff(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t").id  # the default backoff would wait 16 s or more
    with client.take("default") as stream:
        job = stream.next(timeout=30)
        assert job is not None
        job.fail("later", retry_at=datetime.now(UTC) + timedelta(seconds=0.3))
        again = stream.next(timeout=30)
        assert again is not None and again.id == job_id


POISON = textwrap.dedent("""
    import os, signal, sys, pyqueue
    c = pyqueue.Client(sys.argv[1])
    stream = c.take("default")
    job = stream.next(timeout=20, confirm_start=True)  # as a worker does before running it
    print("took", job.id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_job_that_kills_its_worker_three_times_ends_dead(server: ServerProcess) -> None:
    with pyqueue.Client(server.address) as client:
        job_id = client.enqueue("poison").id
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", POISON, server.address], capture_output=True, text=True, timeout=30
            )
            assert out.stdout.split() == ["took", str(job_id)]
            status = wait_for_status(client, job_id, {"ready", "dead"})
        assert status == "dead"
        job = client.get_job(job_id)
        assert job.lost == 3
        (error,) = client.job_errors(job_id)
        assert error.kind == "lost" and "3 attempts of this job were lost" in error.message


def wait_for_status(client: pyqueue.Client, job_id: int, wanted: set[str], timeout: float = 10) -> str:
    # The server notices a killed worker's closed socket at once; this polls only the test's view.
    deadline = time.monotonic() + timeout
    while True:
        status = client.get_job(job_id).status
        if status in wanted or time.monotonic() > deadline:
            return status
        time.sleep(0.02)


def test_timeout_moves_the_job_on_and_refuses_the_late_ack(
    client: pyqueue.Client, server: ServerProcess
) -> None:
    job_id = client.enqueue("t", timeout=0.5, backoff=(0.0, 0.0, 0.0)).id  # retried 1 s after the timeout
    with (
        pyqueue.Client(server.address) as other,
        client.take("default") as slow,
        other.take("default") as fast,
    ):
        first = slow.next(timeout=30)
        assert first is not None and first.id == job_id
        second = fast.next(timeout=10)  # after the timeout and the retry delay
        assert second is not None and second.id == job_id and second.attempts == 2
        with pytest.raises(pyqueue.FailedPrecondition, match="no longer current"):
            first.ack()
        second.ack()
    with pytest.raises(pyqueue.NotFound):
        client.get_job(job_id)


def test_an_extension_keeps_a_job_only_up_to_its_time_limit(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t", timeout=1.0, max_retries=0).id
    with client.take("default") as stream:
        job = stream.next(timeout=30)
        assert job is not None
        job.extend(0.5)  # a short lease within the limit is granted
        job.extend(3600)  # but never past the start plus the job's timeout
        assert wait_for_status(client, job_id, {"dead"}) == "dead"
        (error,) = client.job_errors(job_id)
        assert error.kind == "timeout"
        with pytest.raises(pyqueue.FailedPrecondition):
            job.ack()


def test_retention_keeps_completed_jobs_then_purges_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--keep-completed", "0.5", "--keep-dead", "0.5").start()
    try:
        with pyqueue.Client(server.address) as client:
            done = client.enqueue("t").id
            dead = client.enqueue("t").id
            with client.take("default", prefetch=2) as stream:
                for _ in range(2):
                    job = stream.next(timeout=30)
                    assert job is not None
                    job.ack() if job.id == done else job.fail("no", kill=True)
            assert client.get_job(done).status == "completed"
            assert client.get_job(dead).status == "dead"
            for job_id in (done, dead):
                assert wait_gone(client, job_id), f"job {job_id} was not purged"
            with pytest.raises(pyqueue.NotFound):
                client.job_errors(dead)
    finally:
        server.close()
