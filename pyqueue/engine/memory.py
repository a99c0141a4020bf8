"""The in-memory hints: the ready set and the scheduled set, kept in step with the store.

They are only ever changed after the store commit that justifies them (disk first, then memory,
then the announcement), and they are rebuilt from the status index at start-up. A stale entry is
harmless: every claim and promotion re-reads the record and checks it (compare-and-swap).
"""

from collections.abc import Callable, Iterable

from pyqueue._native import ReadyIndex, TimerSet
from pyqueue.engine.dispatcher import Dispatcher
from pyqueue.store.records import JobRecord


class Memory:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.ready = ReadyIndex()
        self.scheduled = TimerSet()
        self.dispatcher = dispatcher
        self.on_scheduled: Callable[[int], None] = lambda due_ms: None
        """Re-arms the scheduler's alarm when a job is scheduled (set by the scheduler)."""

    def became_ready(self, records: Iterable[JobRecord]) -> None:
        queues = set()
        for record in records:
            self.ready.insert(record.queue, record.priority, record.id)
            queues.add(record.queue)
        if queues:
            self.dispatcher.announce(queues)

    def became_scheduled(self, records: Iterable[JobRecord]) -> None:
        earliest = None
        for record in records:
            self.scheduled.insert(record.run_at_ms, record.id)
            if earliest is None or record.run_at_ms < earliest:
                earliest = record.run_at_ms
        if earliest is not None:
            self.on_scheduled(earliest)
