"""The scheduler: an alarm clock over the scheduled set, not a poller.

It sleeps until the earliest due time; a newly scheduled earlier job re-arms it. When the alarm
goes off it promotes everything due in batches, one commit per batch (disk, then the ready set,
then the announcement). Tests drive `run_once` with an injected clock.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pyqueue._native import TimerSet
from pyqueue.engine.model import Clock

log = logging.getLogger("pyqueue.scheduler")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    batch_size: int = 1000


class Scheduler:
    def __init__(
        self,
        scheduled: TimerSet,
        promote: Callable[[Sequence[tuple[int, int]]], Awaitable[object]],
        clock: Clock,
        config: SchedulerConfig = SchedulerConfig(),
    ) -> None:
        self._scheduled = scheduled
        self._promote = promote
        self._clock = clock
        self.config = config
        self._rearm = asyncio.Event()
        self._alarm_ms: int | None = None
        self._task: asyncio.Task[None] | None = None
        self.promoted = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pyqueue-scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def rearm(self, due_ms: int) -> None:
        """A job was scheduled for `due_ms`: wake up if that is earlier than the alarm."""
        if self._alarm_ms is None or due_ms < self._alarm_ms:
            self._rearm.set()

    async def run_once(self) -> int:
        """Promote one batch of what is due now; returns how many keys it took."""
        due = self._scheduled.pop_due(self._clock(), self.config.batch_size)
        if due:
            await self._promote(due)
            self.promoted += len(due)
        return len(due)

    async def _run(self) -> None:
        while True:
            try:
                if await self.run_once() == self.config.batch_size:
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("promoting due jobs failed; retrying at the next alarm")
            self._rearm.clear()
            self._alarm_ms = self._scheduled.next_due()
            timeout = None if self._alarm_ms is None else max(0.0, (self._alarm_ms - self._clock()) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rearm.wait(), timeout)
