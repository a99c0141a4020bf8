"""The scheduler: promotes scheduled jobs (delayed, or waiting for a retry) to ready when due."""

from collections import Counter
from collections.abc import Sequence

from pyqueue.engine import requests
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Clock
from pyqueue.engine.services.alarm import AlarmClock, AlarmConfig
from pyqueue.engine.services.submit import Submit


class Scheduler(AlarmClock):
    name = "scheduler"

    def __init__(
        self,
        memory: Memory,
        submit: Submit,
        stats: Counter[str],
        clock: Clock,
        config: AlarmConfig = AlarmConfig(),
    ) -> None:
        super().__init__(memory.scheduled, clock, config)
        self._memory, self._submit, self._stats = memory, submit, stats

    async def fire(self, due: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = await self._submit(requests.Promote(due, self._memory))
        self._stats["promoted"] += len(ids)
        return ids
