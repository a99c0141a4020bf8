"""An alarm clock over a TimerSet, not a poller: the shape the scheduler, reaper and purger share.

It sleeps until the earliest key is due; a new earlier key re-arms it (`rearm`). When the alarm
goes off it hands what is due to `fire` in batches, one commit per batch; `run_once` is one batch.
"""

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from pyqueue._native import TimerSet
from pyqueue.engine.model import Clock
from pyqueue.engine.services.base import Service


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
