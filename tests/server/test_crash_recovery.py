"""SIGKILL the server with jobs ready and in flight, and restart on the same data."""

import pytest
from harness import assert_nothing_else_comes

import pyqueue


def test_server_sigkill_loses_nothing_acked(server) -> None:  # type: ignore[no-untyped-def]
    with pyqueue.Client(server.address) as client:
        ids = [j.id for j in client.enqueue_many([{"type": "t", "payload": i} for i in range(30)])]
        stream = client.take("default", prefetch=20)
        taken = [stream.next(timeout=10) for _ in range(20)]
        acked = [j.id for j in taken[:10] if j is not None]
        for job in taken[:10]:
            assert job is not None
            job.ack()
        in_flight = {j.id for j in taken[10:] if j is not None}
        server.kill()
    server.restart()
    with pyqueue.Client(server.address) as client:
        for job_id in acked:
            with pytest.raises(pyqueue.NotFound):
                client.get_job(job_id)
        for job_id in in_flight:
            assert client.get_job(job_id).status == "ready"
        remaining = set(ids) - set(acked)
        got = set()
        with client.take("default", prefetch=50) as stream:
            while len(got) < len(remaining):
                job = stream.next(timeout=10)
                assert job is not None
                got.add(job.id)
                job.ack()
            assert_nothing_else_comes(client, stream)
        assert got == remaining


def test_sigterm_shuts_down_cleanly_and_returns_held_jobs(server) -> None:  # type: ignore[no-untyped-def]
    with pyqueue.Client(server.address) as client:
        job_id = client.enqueue("t").id
        stream = client.take("default")
        assert stream.next(timeout=10) is not None
        assert server.stop() == 0
        server.wait_for("stopped cleanly")
    server.restart()
    with pyqueue.Client(server.address) as client:
        assert client.get_job(job_id).status == "ready"


def test_a_job_in_flight_at_three_server_crashes_is_dead(server) -> None:  # type: ignore[no-untyped-def]
    with pyqueue.Client(server.address) as client:
        job_id = client.enqueue("t").id
    for crash in range(1, 4):
        with pyqueue.Client(server.address) as client, client.take("default") as stream:
            job = stream.next(timeout=30, confirm_start=True)
            assert job is not None and job.id == job_id
            server.kill()  # the server dies while the job is in flight (as if it had killed it)
        server.start()
        with pyqueue.Client(server.address) as client:
            stored = client.get_job(job_id)
            assert stored.lost == crash
            assert stored.status == ("dead" if crash == 3 else "ready")
    with pyqueue.Client(server.address) as client:
        assert client.job_errors(job_id)[-1].kind == "lost"
