"""Jobs are spread over the streams of a queue that have room: the one holding the fewest goes
first, ties in turn. Before, the same stream won every wake-up, and a second worker at a few
hundred jobs a second got 1-5% of the jobs, or none."""

import threading
from collections import Counter

import pytest
from harness import ServerProcess

import pyqueue


@pytest.mark.parametrize("streams", [2, 4])
def test_one_job_at_a_time_is_shared_by_every_idle_stream(server: ServerProcess, streams: int) -> None:
    jobs = 60 * streams
    got: Counter[int] = Counter()
    done = threading.Event()
    lock = threading.Lock()

    def work(index: int, stream: pyqueue.TakeStream) -> None:
        while not done.is_set():
            job = stream.next(timeout=0.5)
            if job is None:
                continue
            with lock:
                got[index] += 1
                if sum(got.values()) == jobs:
                    done.set()
            stream.ack(job).result(30)

    with pyqueue.Client(server.address) as client:
        takes = [client.take("q", prefetch=10) for _ in range(streams)]
        workers = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate(takes)]
        for w in workers:
            w.start()
        for _ in range(jobs):  # one at a time, as a web app enqueues
            client.enqueue("t", queue="q")
        assert done.wait(60), got
        for w in workers:
            w.join(30)
        for take in takes:
            take.close()
    shares = [got[i] / jobs for i in range(streams)]
    assert min(shares) >= 0.5 / streams, f"each stream's share of {jobs} jobs: {shares}"
