"""The in-memory hints, kept in step with the store: the ready set and three timer sets.

- ready: per-queue skip lists by (priority, id), what workers take next;
- scheduled: (run_at, id), what the scheduler promotes;
- deadlines: (lease deadline, id) of jobs in flight with a timeout, what the reaper fails;
- expiring: (purge time, id) of completed and dead jobs kept for a while, what the purger deletes.

They only change after the store commit that justifies them (disk first, then memory, then the
announcement), and they are rebuilt from the status index at start-up. A stale entry is harmless:
every claim, promotion, timeout and purge re-reads the record and checks it (compare-and-swap).
"""

from collections.abc import Callable, Iterable

from pyqueue._native import ReadyIndex, TimerSet
from pyqueue.engine.counts import Counts
from pyqueue.engine.dispatcher import Dispatcher
from pyqueue.store.records import JobRecord


def _ignore(due_ms: int) -> None:
    pass


def _ignore_ids(job_ids: list[int]) -> None:
    pass


def _ignore_running(running: list[tuple[str, int]]) -> None:
    pass


class Memory:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.ready = ReadyIndex()
        self.scheduled = TimerSet()
        self.deadlines = TimerSet()
        self.expiring = TimerSet()
        self.counts = Counts()
        self.dispatcher = dispatcher
        # Each timer set's alarm clock re-arms through these when an earlier key arrives.
        self.on_scheduled: Callable[[int], None] = _ignore
        self.on_deadline: Callable[[int], None] = _ignore
        self.on_expiring: Callable[[int], None] = _ignore
        # Jobs that ended (completed, dead or deleted): the engine wakes who waits for them.
        self.on_ended: Callable[[list[int]], None] = _ignore_ids
        # Jobs in flight whose cancel was asked for, (queue, id): the engine tells their streams.
        self.on_cancel: Callable[[list[tuple[str, int]]], None] = _ignore_running

    def became_ready(self, records: Iterable[JobRecord]) -> None:
        queues = set()
        for record in records:
            if record.fair_key:
                self.ready.insert_fair(record.queue, record.priority, record.id, record.fair_key)
            elif record.limit_key:
                self.ready.insert_keyed(record.queue, record.priority, record.id, record.limit_key)
            else:
                self.ready.insert(record.queue, record.priority, record.id)
            queues.add(record.queue)
        if queues:
            self.dispatcher.announce(queues)

    def became_scheduled(self, records: Iterable[JobRecord]) -> None:
        _add(self.scheduled, records, self.on_scheduled)

    def became_in_flight(self, records: Iterable[JobRecord]) -> None:
        _add(self.deadlines, records, self.on_deadline)

    def became_finished(self, records: Iterable[JobRecord]) -> None:
        _add(self.expiring, records, self.on_expiring)


def _add(timers: TimerSet, records: Iterable[JobRecord], rearm: Callable[[int], None]) -> None:
    earliest = None
    for record in records:
        due = record.timer_ms
        if not due:
            continue
        timers.insert(due, record.id)
        if earliest is None or due < earliest:
            earliest = due
    if earliest is not None:
        rearm(earliest)
