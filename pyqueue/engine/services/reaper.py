"""The reaper: fails attempts whose lease ran out (the job's timeout passed with no ack, fail or
extension). The retry policy then applies as for any failure, and a late ack is refused."""

from collections.abc import Sequence
from typing import Any

from pyqueue.engine import requests
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.services.alarm import WriterAlarm


class Reaper(WriterAlarm):
    name = "reaper"
    timers = "deadlines"
    stat = "timed_out"

    def __init__(self, *args: Any, retry: RetryPolicy, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._retry = retry

    def request(self, due: Sequence[tuple[int, int]]) -> requests.Timeout:
        return requests.Timeout(due, self._memory, self._retry)
