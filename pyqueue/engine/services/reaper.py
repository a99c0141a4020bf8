"""The reaper: fails attempts whose lease ran out (the job's timeout passed with no ack, fail or
extension). The retry policy then applies as for any failure, and a late ack is refused."""

from collections import Counter
from collections.abc import Sequence

from pyqueue.engine import requests
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Clock
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.services.alarm import AlarmClock, AlarmConfig
from pyqueue.engine.services.submit import Submit


class Reaper(AlarmClock):
    name = "reaper"

    def __init__(
        self,
        memory: Memory,
        retry: RetryPolicy,
        submit: Submit,
        stats: Counter[str],
        clock: Clock,
        config: AlarmConfig = AlarmConfig(),
    ) -> None:
        super().__init__(memory.deadlines, clock, config)
        self._memory, self._retry, self._submit, self._stats = memory, retry, submit, stats

    async def fire(self, due: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = await self._submit(requests.Timeout(due, self._memory, self._retry))
        self._stats["timed_out"] += len(ids)
        return ids
