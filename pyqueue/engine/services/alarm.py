"""An alarm clock over a TimerSet, not a poller: the shape the scheduler, reaper and purger share.

It sleeps until the earliest key is due; a new earlier key re-arms it (`rearm`). When the alarm
goes off it hands what is due to `fire` in batches, one commit per batch; `run_once` is one batch.
"""

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyqueue._native import TimerSet
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Clock
from pyqueue.engine.services.base import Service
from pyqueue.engine.services.submit import Submit


@dataclass(frozen=True, slots=True)
class AlarmConfig:
    batch_size: int = 1000


class AlarmClock(Service):
    name = "alarm"

    def __init__(self, timers: TimerSet, clock: Clock, config: AlarmConfig = AlarmConfig()) -> None:
        super().__init__()
        self._timers = timers
        self._clock = clock
        self.config = config
        self._rearm = asyncio.Event()
        self._alarm_ms: int | None = None
        self.fired = 0

    async def fire(self, due: Sequence[tuple[int, int]]) -> object:
        """Act on the (due ms, job id) pairs that are due: the service's own logic."""
        raise NotImplementedError

    def rearm(self, due_ms: int) -> None:
        """A key due at `due_ms` was added: wake up if that is earlier than the alarm."""
        if self._alarm_ms is None or due_ms < self._alarm_ms:
            self._rearm.set()

    async def run_once(self) -> int:
        """Fire one batch of what is due now; returns how many keys it took."""
        due = self._timers.pop_due(self._clock(), self.config.batch_size)
        if due:
            await self.fire(due)
            self.fired += len(due)
        return len(due)

    async def _idle(self, done: int | None, failed: bool) -> None:
        if done == self.config.batch_size:
            return  # a full batch: more may be due at once
        self._rearm.clear()
        self._alarm_ms = self._timers.next_due()
        timeout = None if self._alarm_ms is None else max(0.0, (self._alarm_ms - self._clock()) / 1000)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._rearm.wait(), timeout)


class WriterAlarm(AlarmClock):
    """An alarm clock whose firing is one request to the single writer: the scheduler, the reaper
    and the purger. Each says which of the memory's timer sets it watches (`timers`), which
    request it makes of what is due (`request`) and what it counts (`stat`)."""

    timers = ""
    stat = ""

    def __init__(
        self,
        memory: Memory,
        submit: Submit,
        stats: Counter[str],
        clock: Clock,
        config: AlarmConfig = AlarmConfig(),
    ) -> None:
        super().__init__(getattr(memory, self.timers), clock, config)
        self._memory, self._submit, self._stats = memory, submit, stats

    def request(self, due: Sequence[tuple[int, int]]) -> Any:
        raise NotImplementedError

    async def fire(self, due: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = await self._submit(self.request(due))
        self._stats[self.stat] += len(ids)
        return ids
