"""The shape every timed background service shares: an alarm clock over a TimerSet, not a poller.

It sleeps until the earliest key is due; a new earlier key re-arms it (`rearm`). When the alarm
goes off it hands what is due to `fire` in batches, one commit per batch. `run_once` is one such
step, so tests can drive a service with an injected clock and no sleeping.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pyqueue._native import TimerSet
from pyqueue.engine.model import Clock


@dataclass(frozen=True, slots=True)
class AlarmConfig:
    batch_size: int = 1000


Fire = Callable[[Sequence[tuple[int, int]]], Awaitable[object]]


class AlarmClock:
    name = "alarm"

    def __init__(
        self, timers: TimerSet, fire: Fire, clock: Clock, config: AlarmConfig = AlarmConfig()
    ) -> None:
        self._timers = timers
        self._fire = fire
        self._clock = clock
        self.config = config
        self._rearm = asyncio.Event()
        self._alarm_ms: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._log = logging.getLogger(f"pyqueue.{self.name}")
        self.fired = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"pyqueue-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def rearm(self, due_ms: int) -> None:
        """A key due at `due_ms` was added: wake up if that is earlier than the alarm."""
        if self._alarm_ms is None or due_ms < self._alarm_ms:
            self._rearm.set()

    async def run_once(self) -> int:
        """Fire one batch of what is due now; returns how many keys it took."""
        due = self._timers.pop_due(self._clock(), self.config.batch_size)
        if due:
            await self._fire(due)
            self.fired += len(due)
        return len(due)

    async def _run(self) -> None:
        while True:
            try:
                if await self.run_once() == self.config.batch_size:
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log.exception("%s failed; trying again at the next alarm", self.name)
            self._rearm.clear()
            self._alarm_ms = self._timers.next_due()
            timeout = None if self._alarm_ms is None else max(0.0, (self._alarm_ms - self._clock()) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rearm.wait(), timeout)
