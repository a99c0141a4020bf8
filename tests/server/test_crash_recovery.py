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
        got: set[int] = set()
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
