"""The last hour of each queue, in fixed steps, kept in memory: what the dashboard charts.

Each step holds a queue's events (enqueued, completed, failed, dead) and the times its jobs
waited ready before a worker took them, as counts per bucket (telemetry's WAIT_SECONDS) so that steps, queues
and shards add up before a percentile is read. Steps are aligned to the wall clock (a step is
`now // step`), so shards of one server agree on them without talking.

Storage is sparse: a queue costs nothing in a step where nothing happened, and a step older than
the window is dropped at the next record. The writer thread records once per commit; a reader
takes a copy under the lock. Nothing is written to disk: a restart starts an empty hour.
"""

import bisect
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

HISTORY_EVENTS = ("enqueued", "completed", "failed", "dead")
STEP_SECONDS = 10
STEPS = 360  # an hour of 10-second steps


MAX_QUEUES = 256  # queues kept by name; the events of more are added up under OTHER_QUEUES
OTHER_QUEUES = ""  # never a queue's name (an empty one means "default")


@dataclass(frozen=True)
class QueueSteps:
    """One queue's steps, oldest first, each list `steps` long; `waits` holds a row per step."""

    events: dict[str, list[int]]
    waits: list[list[int]]


class StepCounts:
    def __init__(
        self,
        wait_bounds: tuple[float, ...],
        step_seconds: int = STEP_SECONDS,
        steps: int = STEPS,
        clock: Callable[[], float] = time.time,
        max_queues: int = MAX_QUEUES,
    ) -> None:
        self.wait_bounds, self.step_seconds, self.steps = wait_bounds, step_seconds, steps
        self._clock = clock
        self._max_queues = max_queues
        # queue -> step -> one row: the events' counts, then a count per wait bound and one past
        # the last (about 200 bytes a step a busy queue: 256 queues over an hour, under 20 MB)
        self._queues: dict[str, dict[int, list[int]]] = {}
        self._lock = threading.Lock()

    def current_step(self) -> int:
        return int(self._clock() // self.step_seconds)

    def record(self, events: Mapping[tuple[str, str], int], waits: Mapping[str, list[float]]) -> None:
        """One commit's events ((event, queue) -> n) and waits (queue -> seconds)."""
        now = self.current_step()
        base = len(HISTORY_EVENTS)
        with self._lock:
            for (event, queue), n in events.items():
                if event in HISTORY_EVENTS:
                    self._row(queue, now)[HISTORY_EVENTS.index(event)] += n
            for queue, seconds in waits.items():
                row = self._row(queue, now)
                for value in seconds:
                    row[base + bisect.bisect_left(self.wait_bounds, value)] += 1

    def _row(self, queue: str, now: int) -> list[int]:
        steps = self._queues.get(queue)
        if steps is None:
            if len(self._queues) >= self._max_queues:  # a flood of queue names costs one more
                queue = OTHER_QUEUES
            steps = self._queues.setdefault(queue, {})
        row = steps.get(now)
        if row is None:
            row = steps[now] = [0] * (len(HISTORY_EVENTS) + len(self.wait_bounds) + 1)
            for old in [s for s in steps if s <= now - self.steps]:  # a new step: the window moved
                del steps[old]
        return row

    def read(self) -> tuple[int, dict[str, QueueSteps]]:
        """(the current step, each queue with something in the window), the window ending at it.
        Past MAX_QUEUES queues, the rest are added up under OTHER_QUEUES. The lock is held only to
        take the rows (a row is written only while its step is current, so only that one is
        copied): the writer, which records under it, is never held up by the building."""
        now = self.current_step()
        first = now - self.steps + 1
        base = len(HISTORY_EVENTS)
        empty = [0] * (base + len(self.wait_bounds) + 1)
        with self._lock:
            for queue in [q for q, steps in self._queues.items() if all(s < first for s in steps)]:
                del self._queues[queue]  # a queue idle for the whole window (or deleted) is let go
            taken = {
                queue: {s: list(row) if s == now else row for s, row in steps.items() if s >= first}
                for queue, steps in self._queues.items()
            }
        out: dict[str, QueueSteps] = {}
        for queue, steps in taken.items():
            rows = [steps.get(s, empty) for s in range(first, now + 1)]
            out[queue] = QueueSteps(
                events={e: [r[i] for r in rows] for i, e in enumerate(HISTORY_EVENTS)},
                waits=[r[base:] for r in rows],
            )
        return now, out
