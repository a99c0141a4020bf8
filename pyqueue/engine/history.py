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


@dataclass
class Step:
    events: list[int]
    waits: list[int]  # a count per wait bound, and one past the last


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
    ) -> None:
        self.wait_bounds, self.step_seconds, self.steps = wait_bounds, step_seconds, steps
        self._clock = clock
        self._queues: dict[str, dict[int, Step]] = {}
        self._lock = threading.Lock()

    def current_step(self) -> int:
        return int(self._clock() // self.step_seconds)

    def record(self, events: Mapping[tuple[str, str], int], waits: Mapping[str, list[float]]) -> None:
        """One commit's events ((event, queue) -> n) and waits (queue -> seconds)."""
        now = self.current_step()
        with self._lock:
            for (event, queue), n in events.items():
                if event in HISTORY_EVENTS:
                    self._step(queue, now).events[HISTORY_EVENTS.index(event)] += n
            for queue, seconds in waits.items():
                counts = self._step(queue, now).waits
                for value in seconds:
                    counts[bisect.bisect_left(self.wait_bounds, value)] += 1

    def _step(self, queue: str, now: int) -> Step:
        steps = self._queues.get(queue)
        if steps is None:
            steps = self._queues[queue] = {}
        step = steps.get(now)
        if step is None:
            step = steps[now] = self._empty()
            for old in [s for s in steps if s <= now - self.steps]:  # a new step: the window moved
                del steps[old]
        return step

    def _empty(self) -> Step:
        return Step([0] * len(HISTORY_EVENTS), [0] * (len(self.wait_bounds) + 1))

    def read(self) -> tuple[int, dict[str, QueueSteps]]:
        """(the current step, each queue with something in the window), the window ending at it."""
        now = self.current_step()
        first = now - self.steps + 1
        out: dict[str, QueueSteps] = {}
        with self._lock:
            for queue, steps in self._queues.items():
                kept = {s: step for s, step in steps.items() if s >= first}
                if not kept:
                    continue
                empty = self._empty()
                rows = [kept.get(s, empty) for s in range(first, now + 1)]
                out[queue] = QueueSteps(
                    events={e: [r.events[i] for r in rows] for i, e in enumerate(HISTORY_EVENTS)},
                    waits=[list(r.waits) for r in rows],
                )
            for queue in [q for q, steps in self._queues.items() if all(s < first for s in steps)]:
                del self._queues[queue]  # a queue idle for the whole window (or deleted) is let go
        return now, out
