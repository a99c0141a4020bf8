"""`pyqueue worker` as a deploy and a bad day see it: shutdowns that lose nothing, time limits
that hold, jobs of a type the worker lacks, failures that show."""

import signal
import sys
import time
from pathlib import Path

import pytest
from harness import ProcessOutput, children, wait_gone, wait_status
from test_worker import start_worker, wait_for_lines

import pyqueue

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import sample_app  # noqa: E402


def stop(worker) -> str:  # type: ignore[no-untyped-def]
    worker.send_signal(signal.SIGTERM)
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out
    return str(out)


def test_three_rolling_deploys_kill_no_job(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    jobs = [sample_app.linger.enqueue(30) for _ in range(5)]
    for deploy in range(1, 4):
        worker = start_worker(server, log, "--concurrency", "1", "--grace", "1")
        # The first job starts (it is the oldest, back at the front after each deploy); the next
        # ones sit in the worker's prefetch, unstarted.
        wait_for_lines(log, deploy)
        out = stop(worker)
        assert "did not finish within the 1s grace period" in out
    first, *waiting = (client.get_job(j.id) for j in jobs)
    assert [j.status for j in (first, *waiting)] == ["ready"] * 5, "no job is dead"
    assert (first.attempts, first.lost) == (3, 0)
    assert [e.kind for e in client.job_errors(first.id)] == ["interrupted"] * 3
    for job in waiting:
        assert (job.attempts, job.lost, job.errors) == (0, 0, 0), "prefetched, never started"


def test_a_sync_handler_past_its_limit_is_failed_and_its_thread_abandoned(
    app, client, server, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    job = sample_app.sync_overrun.enqueue(600)  # its thread sleeps on long after the test
    after = sample_app.add.enqueue(1, 2)
    worker = start_worker(server, log, "--concurrency", "1")
    try:
        assert wait_status(client, job.id, "dead")
        (error,) = client.job_errors(job.id)
        # The worker's own failure, not the server's backstop (which waits a grace past the limit).
        assert (error.kind, error.error_type) == ("error", "TimeLimitExceeded"), error
        # The slot is free again: the next job runs while the abandoned thread still sleeps.
        assert wait_for_lines(log, 2) == ["sync overrun started", "add 3"]
    finally:
        out = stop(worker)  # at once: the worker's exit does not wait for the abandoned thread
    assert "its thread is abandoned" in out
    assert "refused the outcome" not in out, "the server had not failed the attempt first"
    assert "sync overrun finished" not in log.read_text()
    with pytest.raises(pyqueue.NotFound):
        client.get_job(after.id)  # completed (and not kept)


def test_an_async_handler_past_its_limit_is_cancelled(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    job = sample_app.async_overrun.enqueue(8)
    marker = sample_app.add.enqueue(2, 2)
    worker = start_worker(server, log, "--concurrency", "1")
    try:
        assert wait_status(client, job.id, "dead")
        assert wait_for_lines(log, 2) == ["async overrun started", "add 4"]
    finally:
        out = stop(worker)
    assert "it was cancelled" in out
    assert "async overrun finished" not in log.read_text()
    with pytest.raises(pyqueue.NotFound):
        client.get_job(marker.id)


def test_the_process_pool_kills_a_job_past_its_limit(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    job = sample_app.sync_overrun.enqueue(8)
    sample_app.add.enqueue(3, 3)
    worker = start_worker(server, log, "--concurrency", "1", "--pool", "process")
    try:
        assert wait_status(client, job.id, "dead", timeout=60)
        assert wait_for_lines(log, 2, timeout=60) == ["sync overrun started", "add 6"]
    finally:
        out = stop(worker)
    assert "its process was killed" in out
    assert "sync overrun finished" not in log.read_text(), "the child was killed, not left running"


def test_drain_keeps_time_limits(app: pyqueue.App, client: pyqueue.Client) -> None:
    from pyqueue.testing import drain

    job = sample_app.async_overrun.enqueue(8)
    result = drain(app)
    ((failed, error),) = result.failed
    assert failed.id == job.id and type(error).__name__ == "TimeLimitExceeded"
    assert client.get_job(job.id).status == "dead"


def test_a_job_of_an_unknown_type_is_handed_back_without_an_attempt(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    stranger = client.enqueue("__main__.send_email", {"args": [], "kwargs": {}}, queue="work")
    second = client.enqueue("__main__.send_email", {"args": [], "kwargs": {}}, queue="work")
    marker = sample_app.add.enqueue(5, 5)
    worker = start_worker(server, log)
    try:
        assert wait_for_lines(log, 1) == ["add 10"]
        assert wait_status(client, stranger.id, "scheduled")
        assert wait_status(client, second.id, "scheduled")
    finally:
        out = stop(worker)
    for job_id in (stranger.id, second.id):
        job = client.get_job(job_id)
        assert (job.attempts, job.errors) == (0, 1)  # no attempt; the hand-back is in its history
        (entry,) = client.job_errors(job_id)
        assert "handed back 1 time by workers that have no job function named" in entry.message
    assert out.count("no job function named '__main__.send_email'") == 1, out
    assert "sample_app.add" in out, "the error names what the app has"
    with pytest.raises(pyqueue.NotFound):
        client.get_job(marker.id)


def test_failures_are_logged_with_their_traceback_and_jobs_with_log_jobs(
    app, client, server, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    boom = sample_app.explode.enqueue("kaboom")
    sample_app.add.enqueue(1, 1)
    worker = start_worker(server, log, "--log-jobs", "--summary-every", "0.5")
    early: list[str] = []
    try:
        assert wait_status(client, boom.id, "scheduled")
        wait_for_lines(log, 1)
        assert worker.stdout is not None
        for line in worker.stdout:  # the summary comes within a second; the test's timeout bounds it
            early.append(line)
            if "last 0s: 1 done, 1 failed" in line:
                break
    finally:
        out = "".join(early) + stop(worker)
    assert (
        f"WARNING pyqueue.worker: job {boom.id} (sample_app.explode) attempt 1 failed: ValueError: kaboom"
        in out
    )
    assert "raise ValueError(reason)" in out, "with its traceback"
    assert "(sample_app.add) attempt 1 done in" in out


def test_a_job_that_kills_pyqueue_worker_three_times_is_dead(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    job = sample_app.crash.enqueue()
    for death in range(1, 4):
        worker = start_worker(server, log)
        worker.communicate(timeout=60)
        assert worker.returncode == -signal.SIGKILL
        assert wait_for_lines(log, death) == ["crash"] * death
        assert wait_status(client, job.id, "dead" if death == 3 else "ready")
    stored = client.get_job(job.id)
    assert (stored.lost, stored.attempts) == (3, 3)
    assert client.job_errors(job.id)[-1].kind == "lost"


def test_processes_runs_one_worker_per_process_and_stops_them_all(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess as sp

    log = tmp_path / "ran.log"
    for n in range(4):
        sample_app.add.enqueue(n, n)
    worker = start_worker(server, log, "--processes", "2")
    output = ProcessOutput(worker)
    try:
        assert sorted(wait_for_lines(log, 4)) == sorted(f"add {2 * n}" for n in range(4))
        children = sp.run(["pgrep", "-P", str(worker.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 2
        # Both are serving (one may have taken all four jobs while the other still started).
        output.wait_lines("worker serving", 2)
    finally:
        worker.send_signal(signal.SIGTERM)
        out = output.finish()
    assert worker.returncode == 0, out
    assert out.count("worker stopped") == 2, "each process stopped gracefully"


def test_processes_stopped_while_its_children_start_exits_cleanly(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job = sample_app.add.enqueue(1, 1)
    worker = start_worker(server, tmp_path / "ran.log", "--processes", "2")
    output = ProcessOutput(worker)
    # The parent has started its children; they are (very likely) still importing.
    output.wait_lines("started 2 worker processes", 1)
    worker.send_signal(signal.SIGTERM)
    out = output.finish()
    assert worker.returncode == 0, out
    stored = client.get_job(job.id)
    assert stored.status in ("ready", "completed") and stored.lost == 0


def test_processes_stopped_as_soon_as_a_child_exists_stops_every_child(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The parent's handlers are in place before its first child starts: a SIGTERM at any moment
    # after that stops the children too (one between the start and the handlers killed the
    # parent and left its children running).
    worker = start_worker(server, tmp_path / "ran.log", "--processes", "2")
    output = ProcessOutput(worker)
    deadline = time.monotonic() + 60
    while not children(worker.pid):
        assert worker.poll() is None and time.monotonic() < deadline, "no child started"
        time.sleep(0.001)
    started = children(worker.pid)
    worker.send_signal(signal.SIGTERM)
    out = output.finish()
    assert worker.returncode == 0, out
    for pid in started:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), out


def test_jobs_prefetched_on_a_stream_that_died_do_not_run_there(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    first = sample_app.linger.enqueue(1.5)
    waiting = [sample_app.add.enqueue(n, 100) for n in range(3)]
    worker = start_worker(server, log, "--concurrency", "1")
    try:
        wait_for_lines(log, 1)  # the first job runs; the three others wait in the prefetch
        server.kill()  # the stream dies under the running job
        server.restart()
        # After the restart every job runs to completion once; the prefetched ones never ran on
        # the dead stream (their attempts were handed back), so each ran exactly once in all.
        for job in (first, *waiting):
            assert wait_gone(client, job.id, timeout=60)
        lines = log.read_text().splitlines()
        assert sorted(line for line in lines if line.startswith("add")) == [
            f"add {n + 100}" for n in range(3)
        ]
    finally:
        out = stop(worker)
    assert "Task exception was never retrieved" not in out, out


def test_a_job_finishing_while_the_server_stops_is_not_run_again(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    job = sample_app.linger.enqueue(1.0)
    waiting = sample_app.add.enqueue(2, 3)
    worker = start_worker(server, log, "--concurrency", "1")
    try:
        wait_for_lines(log, 1)  # linger started
        # A server stop takes the answers of started attempts for a moment: the ack that comes
        # while it stops completes the job, which is not run again after the restart.
        server.stop()
        server.restart()
        assert wait_gone(client, job.id, timeout=60)
        assert wait_gone(client, waiting.id, timeout=60)
        lines = log.read_text().splitlines()
        assert lines.count("linger started") == 1, lines
        assert lines.count("add 5") == 1, lines
    finally:
        stop(worker)


def test_a_job_no_worker_knows_is_dead_after_max_unknown_handbacks(tmp_path: Path) -> None:
    import asyncio

    from harness import ServerProcess

    from pyqueue.worker import Worker, WorkerConfig

    server = ServerProcess(tmp_path / "data", "--max-unknown-handbacks", "3").start()
    try:
        with pyqueue.Client(server.address) as client:
            stranger = client.enqueue("__main__.send_email", {"args": [], "kwargs": {}}, queue="work")
            app = pyqueue.App(server.address)

            async def until_dead() -> None:
                worker = Worker(app, WorkerConfig(queues=("work",), unknown_delay_s=0.01))
                running = asyncio.ensure_future(worker.run())
                ended = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: client.wait_job(stranger.id, timeout=60)
                )
                worker.stopping.set()
                await running
                assert ended.status == "dead", ended

            asyncio.run(until_dead())
            job = client.get_job(stranger.id)
            assert (job.status, job.attempts) == ("dead", 0)
            (entry,) = client.job_errors(stranger.id)
            assert "handed back 3 times by workers that have no job function named '__main__.send_email'" in (
                entry.message
            )
            assert "--max-unknown-handbacks" in entry.message
            app.close()
    finally:
        server.close()


def test_the_readme_snippet_run_as_a_script_is_warned_once_per_function(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import os
    import re
    import subprocess

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippet = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    assert "send_email.enqueue(" in snippet
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    env = {**os.environ, "PYQUEUE_ADDRESS": server.address}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("UnimportableJobWarning") == 1, out.stderr
    assert "job type '__main__.send_email' is defined in a script run as __main__" in out.stderr
