"""Cancelling jobs: a waiting one at once; a running one through its worker's stream (an async
handler is cancelled, a sync one sees current_job().cancelled), ending CANCELLED, never retried;
a prefetched one never runs; the request survives a server kill -9; and `pyqueue cancel`."""

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sample_app
from test_worker import start_worker, wait_for_lines

import pyqueue


def test_waiting_jobs_are_cancelled_at_once(app, client) -> None:  # type: ignore[no-untyped-def]
    ready = client.enqueue("t", queue="mail", keep_result=60)
    later = client.enqueue("t", queue="mail", delay=3600)
    result = client.cancel_jobs(ids=[ready.id, later.id])
    assert sorted(result.changed) == sorted([ready.id, later.id])
    assert {client.get_job(j.id).status for j in (ready, later)} == {"cancelled"}
    assert client.count_jobs(queue="mail", status="cancelled") == 2
    with pytest.raises(pyqueue.JobFailed, match="cancelled"):
        ready.result(timeout=5)
    again = client.cancel(ready.id)
    assert [(r.id, r.code) for r in again.rejected] == [(ready.id, "FAILED_PRECONDITION")]
    with client.take("mail") as stream:
        assert stream.next(timeout=1) is None, "a cancelled job is not delivered"


def test_running_handlers_are_stopped_and_end_cancelled(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    async_job = sample_app.wait_forever.enqueue()
    sync_job = sample_app.cooperative.enqueue()
    worker = start_worker(server, log, "--concurrency", "2")
    try:
        wait_for_lines(log, 2)  # both handlers are running
        client.cancel_jobs(ids=[async_job.id, sync_job.id])
        for job in (async_job, sync_job):
            ended = client.wait_job(job.id, timeout=30)
            assert (ended.status, ended.attempts) == ("cancelled", 1), ended
        assert "noticed the cancel" in log.read_text()
        assert [e.message for e in client.job_errors(async_job.id)] == ["cancelled by request"]
        after = sample_app.add.enqueue(2, 2)  # the worker goes on
        wait_for_lines(log, 4)
        assert "add 4" in log.read_text() and client.count_jobs(ids=[after.id], status="ready") == 0
    finally:
        worker.send_signal(signal.SIGTERM)
        out = worker.communicate(timeout=60)[0]
    assert "Traceback" not in out, out


def test_under_the_process_pool_a_cancel_stops_the_child_and_current_job_works(
    app, client, server, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    known = sample_app.whoami.enqueue()
    worker = start_worker(server, log, "--pool", "process", "--concurrency", "3")
    try:
        assert wait_for_lines(log, 1, timeout=60) == [f"current job {known.id} attempt 1"]
        cooperative = sample_app.cooperative.enqueue()
        stubborn = sample_app.stubborn.enqueue()
        lines = wait_for_lines(log, 3, timeout=60)
        pid = int(next(line for line in lines if line.startswith("stubborn pid")).split()[-1])
        client.cancel_jobs(ids=[cooperative.id, stubborn.id])
        for job in (cooperative, stubborn):
            ended = client.wait_job(job.id, timeout=30)
            assert (ended.status, ended.attempts) == ("cancelled", 1), ended
        assert "noticed the cancel" in log.read_text(), "the cooperative handler saw .cancelled"
        assert not Path(f"/proc/{pid}").exists(), "the stubborn handler's process was killed"
        sample_app.add.enqueue(2, 2)  # the pool goes on, with a new child
        assert "add 4" in wait_for_lines(log, 5, timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        out = worker.communicate(timeout=60)[0]
    assert "Traceback" not in out and "LookupError" not in out, out


def test_a_prefetched_job_cancelled_before_it_starts_never_runs(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    busy = sample_app.wait_forever.enqueue()
    waiting = sample_app.add.enqueue(1, 1)
    worker = start_worker(server, log, "--concurrency", "1")
    try:
        wait_for_lines(log, 1)  # the first job runs; the second waits in the worker's prefetch
        assert client.get_job(waiting.id).status == "in_flight"
        client.cancel(waiting.id)
        client.cancel(busy.id)
        assert client.wait_job(waiting.id, timeout=30).status == "cancelled"
        assert client.wait_job(busy.id, timeout=30).status == "cancelled"
        assert "add 2" not in log.read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)


def test_a_cancel_survives_a_server_kill_9(server, client) -> None:  # type: ignore[no-untyped-def]
    job = client.enqueue("t", queue="mail")
    told = threading.Event()
    stream = client.take("mail")
    stream.on_cancel(lambda ids: told.set())
    taken = stream.next(timeout=30, confirm_start=True)
    assert taken is not None and taken.id == job.id
    client.cancel(job.id)
    assert told.wait(30), "the stream was not told"
    server.kill()
    server.proc.wait()  # type: ignore[union-attr]
    server.restart()
    with pyqueue.Client(server.address) as again:
        assert again.get_job(job.id).status == "cancelled", "recovered as cancelled, not run again"


def test_the_cancel_command(server, client) -> None:  # type: ignore[no-untyped-def]
    for _ in range(2):
        client.enqueue("t", queue="junk")
    done = subprocess.run(
        [sys.executable, "-m", "pyqueue", "--address", server.address, "cancel", "--queue", "junk", "--yes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "2 changed" in done.stdout, done.stdout + done.stderr
    assert client.count_jobs(queue="junk", status="cancelled") == 2
