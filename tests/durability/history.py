"""A history checker for crash tests.

Producers enqueue unique payloads and record every attempt and every acknowledged enqueue; workers
record every delivery and every confirmed ack. After the run everything is drained and compared:

- lost: an acknowledged enqueue that was never delivered;
- unexpected: a delivery of a payload nobody tried to enqueue;
- delivered after its ack was confirmed: the job came back although it was completed;
- duplicates: delivered more than once; allowed only for a job in flight at a crash: first delivered
  before the crash window ended (the server restarted), not confirmed acked before it began, and
  delivered again after it began. A crash is a window, not an instant: a delivery already on its
  way when the server died can be recorded a moment after the kill.
"""

import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise

import pyqueue


@dataclass
class History:
    attempted: set[int] = field(default_factory=set)
    acknowledged: set[int] = field(default_factory=set)  # payloads whose enqueue was answered
    deliveries: dict[int, list[float]] = field(default_factory=dict)
    ack_confirmed: dict[int, float] = field(default_factory=dict)
    crashes: list[tuple[float, float]] = field(default_factory=list)  # (killed at, restarted by)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, payload: int) -> None:
        with self.lock:
            self.deliveries.setdefault(payload, []).append(time.monotonic())

    def confirmed(self, payload: int) -> None:
        with self.lock:
            self.ack_confirmed.setdefault(payload, time.monotonic())

    def wait_for_more_acknowledged(self, more: int, stall: float = 60) -> None:
        """Wait until `more` enqueues were acknowledged after this call, while they keep coming:
        `stall` bounds a wait with no new acknowledgement, not the whole (a loaded machine is slow)."""
        with self.lock:
            count = len(self.acknowledged) + more
        seen, deadline = -1, time.monotonic() + stall
        while True:
            with self.lock:
                now = len(self.acknowledged)
            if now >= count:
                return
            if now > seen:
                seen, deadline = now, time.monotonic() + stall
            assert time.monotonic() < deadline, f"no enqueue acknowledged for {stall} s ({now} in all)"
            time.sleep(0.01)

    def verdict(self) -> dict[str, int]:
        lost = self.acknowledged - set(self.deliveries)
        unexpected = set(self.deliveries) - self.attempted
        after_ack = sum(1 for p, t in self.ack_confirmed.items() if any(d > t for d in self.deliveries[p]))
        duplicates = [p for p, times in self.deliveries.items() if len(times) > 1]
        unexplained = [
            p
            for p in duplicates
            if not all(self._in_flight_at_a_crash(p, t0, t1) for t0, t1 in pairwise(self.deliveries[p]))
        ]
        return {
            "attempted": len(self.attempted),
            "acknowledged": len(self.acknowledged),
            "delivered": len(self.deliveries),
            "lost": len(lost),
            "unexpected": len(unexpected),
            "delivered_after_ack": after_ack,
            "duplicates": len(duplicates),
            "unexplained_duplicates": len(unexplained),
            "crashes": len(self.crashes),
        }

    def _in_flight_at_a_crash(self, payload: int, t0: float, t1: float) -> bool:
        acked = self.ack_confirmed.get(payload)
        return any(
            t0 <= end and t1 >= start and (acked is None or acked >= start) for start, end in self.crashes
        )


class Load:
    """Producers and one worker against `address()` (it changes when the server restarts)."""

    def __init__(
        self, history: History, address: str, producers: int = 2, queues: tuple[str, ...] = ("default",)
    ) -> None:
        self.history = history
        self.address = address
        self.queues = queues
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self._next = iter(range(1, 10**9))
        self._next_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._produce, daemon=True) for _ in range(producers)]
        self._threads.append(threading.Thread(target=self._consume, daemon=True))

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _payloads(self, n: int) -> list[int]:
        with self._next_lock:
            return [next(self._next) for _ in range(n)]

    def _produce(self) -> None:
        with pyqueue.Client(self.address, timeout=5) as client:
            size = 1
            while not self.stop_producing.is_set():
                payloads = self._payloads(size)
                with self.history.lock:
                    self.history.attempted.update(payloads)
                try:
                    queue = self.queues[payloads[0] % len(self.queues)]
                    client.enqueue_many([{"type": "t", "payload": p, "queue": queue} for p in payloads])
                except pyqueue.PyQueueError:
                    time.sleep(0.05)  # the server is down; its restart is the test's to do
                    continue
                with self.history.lock:
                    self.history.acknowledged.update(payloads)
                size = size % 8 + 1

    def _consume(self) -> None:
        with pyqueue.Client(self.address, timeout=5) as client:
            while not self.stop_consuming.is_set():
                try:
                    with client.take(list(self.queues), prefetch=32) as stream:
                        while not self.stop_consuming.is_set():
                            job = stream.next(timeout=0.2)
                            if job is None:
                                if stream.server_stopping:  # a shard stops or hands over: take again
                                    break
                                continue
                            self.history.delivered(job.payload)
                            job.ack()
                            self.history.confirmed(job.payload)
                except pyqueue.PyQueueError:
                    time.sleep(0.05)

    def drain(self, timeout: float = 60) -> None:
        """Stop producing, then consume until every acknowledged payload was delivered. The
        producers are waited for first: one still in a call acknowledges its batch when the call
        returns, after a check made before it would have missed it.

        `timeout` bounds a stall, not the drain: while deliveries go on, it waits (a loaded
        machine drains a backlog slowly, and what is left then is slow, not lost); the test's own
        timeout bounds the whole."""
        self.stop_producing.set()
        deadline = time.monotonic() + timeout
        for producer in self._threads[:-1]:
            producer.join(timeout)
            assert not producer.is_alive(), "a producer did not stop"
        left = None
        while time.monotonic() < deadline:
            with self.history.lock:
                missing = len(self.history.acknowledged - set(self.history.deliveries))
            if not missing:
                break
            if left is None or missing < left:
                left, deadline = missing, time.monotonic() + timeout  # progress: the stall bound starts over
            time.sleep(0.1)
        self.stop_consuming.set()
        for thread in self._threads:
            thread.join(10)
