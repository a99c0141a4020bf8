"""The purger: deletes completed and dead jobs whose retention ran out, with their payload and
error records, in batches. Driven by the expiring set, so it never scans the store."""

from collections import Counter
from collections.abc import Sequence

from pyqueue.engine import requests
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Clock
from pyqueue.engine.services.alarm import AlarmClock, AlarmConfig
from pyqueue.engine.services.submit import Submit


class Purger(AlarmClock):
    name = "purger"

    def __init__(
        self,
        memory: Memory,
        submit: Submit,
        stats: Counter[str],
        clock: Clock,
        config: AlarmConfig = AlarmConfig(),
    ) -> None:
        super().__init__(memory.expiring, clock, config)
        self._memory, self._submit, self._stats = memory, submit, stats

    async def fire(self, due: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = await self._submit(requests.Purge(due, self._memory))
        self._stats["purged"] += len(ids)
        return ids
