"""Job counts per (queue, status), kept in memory so that ListQueues never scans.

The single writer publishes each batch's deltas after the batch is written; the start-up rebuild
counts the status index once. Readers on other threads see whole-number snapshots (dict reads are
atomic under the GIL); a count may lag a commit by a moment, never drift.
"""

import threading
from collections import Counter

from pyqueue.store.records import Status

Key = tuple[str, int]


class Counts:
    def __init__(self) -> None:
        self._counts: Counter[Key] = Counter()
        self._lock = threading.Lock()  # the writer and the start-up rebuild both apply deltas

    def apply(self, deltas: Counter[Key]) -> None:
        with self._lock:
            self._apply(deltas)

    def _apply(self, deltas: Counter[Key]) -> None:
        for key, delta in deltas.items():
            if delta:
                value = self._counts[key] + delta
                if value:
                    self._counts[key] = value
                else:
                    del self._counts[key]

    def reset(self, counts: Counter[Key]) -> None:
        with self._lock:
            self._counts = Counter(counts)

    def by_queue(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (queue, status), n in list(self._counts.items()):
            out.setdefault(queue, {})[Status(status).label] = n
        return out

    def total(self, queues: list[str] | None, statuses: list[int] | None) -> int:
        return sum(
            n
            for (q, s), n in list(self._counts.items())
            if (not queues or q in queues) and (not statuses or s in statuses)
        )
