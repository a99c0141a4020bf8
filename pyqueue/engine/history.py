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
        self._total: dict[int, list[int]] = {}  # every queue added up, kept as they are counted
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """The queues with something in the window (as of the last read that let idle ones go)."""
        with self._lock:
            return sorted(self._queues)

    def current_step(self) -> int:
        return int(self._clock() // self.step_seconds)

    def record(self, events: Mapping[tuple[str, str], int], waits: Mapping[str, list[float]]) -> None:
        """One commit's events ((event, queue) -> n) and waits (queue -> seconds)."""
        now = self.current_step()
        base = len(HISTORY_EVENTS)
        with self._lock:
            total = self._step_row(self._total, now)
            for (event, queue), n in events.items():
                if event in HISTORY_EVENTS:
                    self._row(queue, now)[HISTORY_EVENTS.index(event)] += n
                    total[HISTORY_EVENTS.index(event)] += n
            for queue, seconds in waits.items():
                row = self._row(queue, now)
                for value in seconds:
                    bucket = base + bisect.bisect_left(self.wait_bounds, value)
                    row[bucket] += 1
                    total[bucket] += 1

    def _row(self, queue: str, now: int) -> list[int]:
        steps = self._queues.get(queue)
        if steps is None:
            if len(self._queues) >= self._max_queues:  # a flood of queue names costs one more
                queue = OTHER_QUEUES
            steps = self._queues.setdefault(queue, {})
        return self._step_row(steps, now)

    def _step_row(self, steps: dict[int, list[int]], now: int) -> list[int]:
        row = steps.get(now)
        if row is None:
            row = steps[now] = [0] * (len(HISTORY_EVENTS) + len(self.wait_bounds) + 1)
            for old in [s for s in steps if s <= now - self.steps]:  # a new step: the window moved
                del steps[old]
        return row

    def read(self, queue: str | None = None) -> tuple[int, dict[str, QueueSteps]]:
        """(the current step, each queue with something in the window), the window ending at it;
        with `queue`, that queue's only. Past MAX_QUEUES queues, the rest are added up under
        OTHER_QUEUES. The lock is held only to take the rows (a row is written only while its step
        is current, so only that one is copied): the writer, which records under it, is never held
        up by the building."""
        now = self.current_step()
        with self._lock:
            self._let_go(now)
            named = self._queues.items() if queue is None else [(queue, self._queues.get(queue, {}))]
            taken = {name: self._taken(steps, now) for name, steps in named if steps}
        return now, {name: self._built(steps, now) for name, steps in taken.items()}

    def read_total(self) -> tuple[int, QueueSteps, list[str]]:
        """(the current step, every queue added up, the queues with something in the window): the
        chart of all queues, as cheap to read as one queue's."""
        now = self.current_step()
        with self._lock:
            self._let_go(now)
            taken, names = self._taken(self._total, now), sorted(self._queues)
        return now, self._built(taken, now), names

    def _let_go(self, now: int) -> None:
        first = now - self.steps + 1
        for queue in [q for q, steps in self._queues.items() if all(s < first for s in steps)]:
            del self._queues[queue]  # a queue idle for the whole window (or deleted) is let go

    def _taken(self, steps: dict[int, list[int]], now: int) -> dict[int, list[int]]:
        first = now - self.steps + 1
        return {s: list(row) if s == now else row for s, row in steps.items() if s >= first}

    def _built(self, steps: dict[int, list[int]], now: int) -> QueueSteps:
        base = len(HISTORY_EVENTS)
        empty = [0] * (base + len(self.wait_bounds) + 1)
        rows = [steps.get(s, empty) for s in range(now - self.steps + 1, now + 1)]
        return QueueSteps(
            events={e: [r[i] for r in rows] for i, e in enumerate(HISTORY_EVENTS)},
            waits=[r[base:] for r in rows],
        )
