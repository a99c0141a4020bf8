"""The scheduler: promotes scheduled jobs (delayed, or waiting for a retry) to ready when due."""

from collections.abc import Sequence

from pyqueue.engine import requests
from pyqueue.engine.services.alarm import WriterAlarm


class Scheduler(WriterAlarm):
    name = "scheduler"
    timers = "scheduled"
    stat = "promoted"

    def request(self, due: Sequence[tuple[int, int]]) -> requests.Promote:
        return requests.Promote(due, self._memory)
