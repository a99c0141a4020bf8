"""Many streams at once: every job delivered once, never to two streams, prefetch respected."""

import threading
from typing import Any

import pyqueue

JOBS = 10_000
STREAMS = 4
PREFETCH = 16


def test_four_streams_share_ten_thousand_jobs(client: pyqueue.Client, server) -> None:  # type: ignore[no-untyped-def]
    for start in range(0, JOBS, 1000):
        client.enqueue_many([{"type": "t", "payload": i} for i in range(start, start + 1000)])

    seen: list[list[int]] = [[] for _ in range(STREAMS)]
    max_unconfirmed = [0] * STREAMS
    done = threading.Event()
    lock = threading.Lock()
    total = [0]

    def work(n: int) -> None:
        with pyqueue.Client(server.address) as c, c.take("default", prefetch=PREFETCH) as stream:
            unconfirmed: set[int] = set()
            pending: list[tuple[int, Any]] = []
            while not done.is_set():
                job = stream.next(timeout=0.2)
                if job is None:
                    continue
                seen[n].append(job.payload)
                # In flight as the worker sees it: delivered and not yet confirmed acked.
                pending = [(i, f) for i, f in pending if not (f.done() and _confirm(unconfirmed, i))]
                unconfirmed.add(job.id)
                max_unconfirmed[n] = max(max_unconfirmed[n], len(unconfirmed))
                pending.append((job.id, stream.ack(job)))
                with lock:
                    total[0] += 1
                    if total[0] == JOBS:
                        done.set()
            for _, f in pending:
                f.result(10)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(STREAMS)]
    for t in threads:
        t.start()
    assert done.wait(90), f"only {total[0]} of {JOBS} delivered"
    for t in threads:
        t.join(30)
    everything = [p for s in seen for p in s]
    assert len(everything) == JOBS
    assert sorted(everything) == list(range(JOBS))
    assert max(max_unconfirmed) <= PREFETCH
    assert sum(1 for s in seen if s) > 1, "the work should spread over the streams"


def _confirm(unconfirmed: set[int], job_id: int) -> bool:
    unconfirmed.discard(job_id)
    return True
