"""A kill -9 under load keeps fair share's promise: after recovery, nothing acknowledged is lost
and two keys with jobs waiting take turns again at once (the turns are rebuilt from the keys
stored with the jobs; every key starts even)."""

import threading

import pytest
from harness import ServerProcess, check_store

import pyqueue


@pytest.mark.timeout(300)
def test_a_kill_under_load_keeps_the_turns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    acknowledged: dict[str, list[int]] = {"big": [], "small": []}
    stop = threading.Event()

    def produce() -> None:
        """Ten jobs of each key per call, faster than the consumer goes: both keys build a backlog."""
        batch = [{"type": "t", "queue": "fair", "fair_key": key} for key in ["big"] * 10 + ["small"] * 10]
        with pyqueue.Client(server.address, timeout=5) as client:
            while not stop.is_set():
                try:
                    jobs = client.enqueue_many(batch)
                except pyqueue.PyQueueError:
                    return  # the server was killed: what was acknowledged is the record
                acknowledged["big"] += [job.id for job in jobs[:10]]
                acknowledged["small"] += [job.id for job in jobs[10:]]

    try:
        with pyqueue.Client(server.address, timeout=20) as client:
            seeds = client.enqueue_many([{"type": "t", "queue": "fair", "fair_key": "big"}] * 300)
            acknowledged["big"] += [job.id for job in seeds]
            producer = threading.Thread(target=produce, daemon=True)
            producer.start()
            acked: set[int] = set()
            with client.take(["fair"], prefetch=8) as stream:
                while len(acked) < 150 or len(acknowledged["small"]) < 200:
                    job = stream.next(timeout=30)
                    assert job is not None, "the load stalled"
                    job.ack()
                    acked.add(job.id)
                server.kill()  # under load: the producer enqueues and jobs are in flight
        stop.set()
        producer.join(30)
        server.restart()
        server.wait_for("rebuilt the in-memory sets")
        drained: list[tuple[int, str]] = []
        with pyqueue.Client(server.address, timeout=20) as client:
            marker = client.enqueue("marker", queue="fair", priority=65535).id  # after every job
            with client.take(["fair"], prefetch=1) as stream:
                while True:
                    job = stream.next(timeout=30)
                    assert job is not None, f"the drain stalled after {len(drained)} jobs"
                    job.ack()
                    if job.id == marker:
                        break
                    drained.append((job.id, job.fair_key))
        every = set(acknowledged["big"]) | set(acknowledged["small"])
        lost = every - acked - {job_id for job_id, _ in drained}
        assert not lost, f"{len(lost)} acknowledged jobs lost: {sorted(lost)[:10]}"
        keys = [key for _, key in drained]
        small = keys.count("small")
        print(f"\nafter the kill: {small} of small and {keys.count('big')} of big waiting")
        assert small >= 10 and keys.count("big") > small, (small, len(keys))
        pairs = [sorted(keys[i : i + 2]) for i in range(0, 2 * small, 2)]
        assert all(pair == ["big", "small"] for pair in pairs), f"the turns after recovery: {keys[:40]}"
        for key in ("big", "small"):  # FIFO within each key
            ids = [job_id for job_id, k in drained if k == key]
            assert ids == sorted(ids), key
        server.stop()
        out = check_store(server.data_dir)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        stop.set()
        server.close()
