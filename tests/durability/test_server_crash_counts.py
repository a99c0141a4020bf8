"""A job that makes the server die while it is handled counts each death toward the poison cap, so
it cannot take the server down forever; the jobs only prefetched beside it count nothing."""

import time
from pathlib import Path

import pytest
from harness import ServerProcess, wait_status

import pyqueue


def wait_started(client: pyqueue.Client, job_id: int, timeout: float = 30) -> None:
    """The worker's start is written without a sync: wait until the store shows it."""
    deadline = time.monotonic() + timeout
    while client.get_job(job_id).started_at is None:
        assert time.monotonic() < deadline, f"job {job_id}'s start was never written"
        time.sleep(0.02)


@pytest.mark.timeout(180)
def test_a_job_that_kills_the_server_at_its_ack_is_dead_after_three_deaths(tmp_path: Path) -> None:
    trigger = tmp_path / "crash"
    server = ServerProcess(tmp_path / "data", env={"PYQUEUE_FAILPOINT_CRASH_AT_ACK": str(trigger)}).start()
    try:
        with pyqueue.Client(server.address) as client:
            poison = client.enqueue("poison", priority=0).id
            others = [j.id for j in client.enqueue_many([{"type": "t", "priority": 1}] * 2)]
        trigger.write_text(str(poison))
        for death in range(1, 4):
            with pyqueue.Client(server.address) as client:
                stream = client.take("default", prefetch=3)
                job = stream.next(timeout=30)  # the worker starts it (its start is reported)
                assert job is not None and job.id == poison
                wait_started(client, poison)
                with pytest.raises(pyqueue.PyQueueError):
                    job.ack()  # the server dies handling it
                assert server.proc is not None and server.proc.wait(30) == -9
                stream.close()
            server.restart()
            with pyqueue.Client(server.address) as client:
                stored = client.get_job(poison)
                if death < 3:
                    assert (stored.status, stored.lost, stored.attempts) == ("ready", death, death)
                for other in others:  # prefetched each time, never started: no attempt counted
                    assert (client.get_job(other).attempts, client.get_job(other).lost) == (0, 0)
        with pyqueue.Client(server.address) as client:
            assert wait_status(client, poison, "dead")
            (error,) = client.job_errors(poison)
            assert error.kind == "lost" and "the server stopped while it ran" in error.message
            # The server serves the rest.
            with client.take("default", prefetch=2) as stream:
                got = [stream.next(timeout=30) for _ in others]
                assert sorted(j.id for j in got if j) == sorted(others)
                for j in got:
                    assert j is not None
                    j.ack()
    finally:
        server.close()


@pytest.mark.timeout(120)
def test_jobs_only_prefetched_when_the_server_is_killed_count_nothing(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            ids = [j.id for j in client.enqueue_many([{"type": "t"}] * 5)]
            stream = client.take("default", prefetch=5)
            first = stream.next(timeout=30)  # started; the other four wait in the prefetch
            assert first is not None and first.id == ids[0]
            wait_started(client, first.id)
            assert all(client.get_job(i).status == "in_flight" for i in ids)
        server.kill()
        stream.close()
        server.restart()
        with pyqueue.Client(server.address) as client:
            started = client.get_job(ids[0])
            assert (started.status, started.attempts, started.lost) == ("ready", 1, 1)
            for job_id in ids[1:]:
                stored = client.get_job(job_id)
                assert (stored.status, stored.attempts, stored.lost) == ("ready", 0, 0)
    finally:
        server.close()
