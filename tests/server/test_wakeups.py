"""Level-triggered delivery through a real server: a job that becomes ready while every stream is
busy (sending a batch, answering an ack) is still on its way at once."""

import functools
import os
import random
import threading
import time

from harness import ServerProcess

import pyqueue

ROUNDS = int(os.environ.get("PYQUEUE_WAKEUP_ROUNDS", "2000"))
STREAMS = 4
STUCK_S = 10.0  # a missed wake-up waits forever; anything slower than this is one


def test_a_job_enqueued_while_streams_are_busy_is_delivered_at_once(server: ServerProcess) -> None:
    delivered: dict[int, float] = {}
    arrived = threading.Condition()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with pyqueue.Client(server.address) as client, client.take("wake", prefetch=2) as stream:
                while not stop.is_set():
                    job = stream.next(timeout=0.2)
                    if job is None:
                        continue
                    with arrived:
                        delivered[job.payload] = time.monotonic()
                        arrived.notify_all()
                    if rng.random() < 0.5:
                        time.sleep(rng.random() / 1000)  # busy a moment: the ack goes out later
                    job.ack(wait=rng.random() < 0.5)
        except BaseException as exc:  # surfaced by the test thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(STREAMS)]
    for worker in workers:
        worker.start()
    delays = []
    try:
        with pyqueue.Client(server.address) as producer:
            producer.enqueue("t", -1, queue="wake")  # every stream connected and serving
            for seq in range(ROUNDS):
                # Each job alone: nothing but its own enqueue can wake a stream for it.
                sent = time.monotonic()
                producer.enqueue("t", seq, queue="wake")
                with arrived:
                    assert arrived.wait_for(functools.partial(_came, seq, delivered, errors), STUCK_S), (
                        f"job {seq} of {ROUNDS} was not delivered within {STUCK_S}s: a missed wake-up"
                    )
                assert not errors, errors
                delays.append(delivered[seq] - sent)
    finally:
        stop.set()
        for worker in workers:
            worker.join(10)
    delays.sort()
    print(
        f"\n{ROUNDS} interleavings: enqueue to delivered p50 {delays[len(delays) // 2] * 1000:.2f} ms, "
        f"p99 {delays[int(len(delays) * 0.99)] * 1000:.2f} ms, worst {delays[-1] * 1000:.2f} ms"
    )


def _came(seq: int, delivered: dict[int, float], errors: list[BaseException]) -> bool:
    return seq in delivered or bool(errors)
