"""Restart with 100,000 ready jobs: enqueues are answered while the in-memory sets rebuild;
takes wait for the rebuild and then get every job."""

import os

from harness import ServerProcess

import pyqueue

JOBS = 100_000


def test_enqueue_answers_during_rebuild_then_every_job_is_taken(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--commit-mode", "buffered").start()
    try:
        with pyqueue.Client(server.address) as client:
            for start in range(0, JOBS, 1000):
                client.enqueue_many([{"type": "t", "payload": b"x"} for _ in range(start, start + 1000)])
        server.stop()

        gate = tmp_path / "rebuild-gate"
        os.mkfifo(gate)
        server.env = {"PYQUEUE_FAILPOINT_REBUILD": str(gate)}
        server.restart()
        with pyqueue.Client(server.address) as client:
            # The rebuild is held at its failpoint: an enqueue must still be answered.
            late = client.enqueue("t", b"late").id
            assert client.get_job(late).status == "ready"
            with client.take("default", prefetch=1000) as stream:
                assert stream.next(timeout=1.0) is None, "takes must wait for the rebuild"
                with open(gate, "wb"):
                    pass  # release the rebuild
                got = set()
                while len(got) < JOBS + 1:
                    job = stream.next(timeout=20)
                    assert job is not None, f"only {len(got)} jobs came after the rebuild"
                    got.add(job.id)
                    stream.ack(job)
                assert late in got
        # The snapshot predates the late enqueue, which reached the ready set by its own path.
        assert "100000 ready" in server.wait_for("rebuilt the in-memory sets")
    finally:
        server.close()
