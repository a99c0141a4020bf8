"""The purger: deletes completed and dead jobs whose retention ran out, with their payload and
error records, in batches. Driven by the expiring set, so it never scans the store."""

from collections.abc import Sequence

from pyqueue.engine import requests
from pyqueue.engine.services.alarm import WriterAlarm


class Purger(WriterAlarm):
    name = "purger"
    timers = "expiring"
    stat = "purged"

    def request(self, due: Sequence[tuple[int, int]]) -> requests.Purge:
        return requests.Purge(due, self._memory)
