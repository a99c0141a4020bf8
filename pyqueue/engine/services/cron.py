"""The cron service: enqueues each periodic job's ticks, kept by the server (not by the workers).

It holds the shard's entries in memory (`entries`: loaded from the store before start, updated by
every change)
and sleeps until the earliest next tick. `run_once` enqueues what is due now, one tick per entry:
the latest due, so after downtime an entry gets one catch-up job (its headers say how many ticks
were missed), never a burst. Each tick is a compare-and-set in the single writer (CronTick), so a
tick goes in once across restarts, kill -9s and concurrent changes.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pyqueue.engine.cron_entry import PREFIX, CronEntry
from pyqueue.engine.model import Clock
from pyqueue.engine.services.base import Service
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store

log = logging.getLogger("pyqueue.cron")

Tick = Callable[[CronEntry, int, int], Awaitable[int | None]]  # entry, tick ms, missed -> job id


@dataclass(frozen=True, slots=True)
class CronConfig:
    max_sleep_s: float = 60.0  # re-check at least this often (a clock that jumped, say)


def load(store: Store) -> dict[str, CronEntry]:
    lo = keys.meta_key(PREFIX)
    return {
        key[len(lo) :].decode(): CronEntry.decode(key[len(lo) :].decode(), raw)
        for key, raw in store.scan(Family.DATA, lo, lo + b"\xff")
    }


class CronService(Service):
    name = "cron"

    def __init__(self, tick: Tick, clock: Clock, config: CronConfig = CronConfig()) -> None:
        super().__init__()
        self._tick = tick
        self._clock = clock
        self.config = config
        self.entries: dict[str, CronEntry] = {}
        self._changed = asyncio.Event()
        self._reported: dict[str, CronEntry] = {}  # skipped entries, as they were when reported
        self.enqueued = 0

    def changed(self, entry: CronEntry, deleted: bool = False) -> None:
        """An entry was set, paused, resumed, ticked or deleted (after its commit)."""
        if deleted:
            self.entries.pop(entry.name, None)
        else:
            self.entries[entry.name] = entry
        self._changed.set()

    def next_due_ms(self) -> int | None:
        due = [e.next_tick_ms() for e in self.entries.values() if not e.paused and not self._skipped(e)]
        return min(due) if due else None

    def _skipped(self, entry: CronEntry) -> bool:
        """An entry whose next run cannot be computed is reported (once) and skipped: it must not
        stop every other periodic job of the shard."""
        problem = entry.problem()
        if problem and self._reported.get(entry.name) != entry:
            self._reported[entry.name] = entry
            log.error(
                "periodic job %s is skipped: %s; change or delete it (pyqueue cron)", entry.name, problem
            )
        return bool(problem)

    async def run_once(self) -> int:
        """Enqueue every tick due now; returns how many jobs went in."""
        now = self._clock()
        enqueued = 0
        for entry in list(self.entries.values()):
            if self._skipped(entry):
                continue
            due = entry.due(now)
            if due is None:
                continue
            tick, missed = due
            job_id = await self._tick(entry, tick, missed)
            if self.entries.get(entry.name) is entry:
                self.entries[entry.name] = entry.with_tick(tick)
            if job_id is not None:
                enqueued += 1
                if missed:
                    log.warning("%s: %d ticks were missed; enqueued one for the latest", entry.name, missed)
        self.enqueued += enqueued
        return enqueued

    async def _idle(self, done: int | None, failed: bool) -> None:
        self._changed.clear()
        due = self.next_due_ms()
        wait = self.config.max_sleep_s if due is None else max(0.0, (due - self._clock()) / 1000)
        if failed:
            wait = max(wait, 1.0)  # a tick that cannot go in now is tried again, not in a spin
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(wait, self.config.max_sleep_s)):
                await self._changed.wait()

    def _failed(self, exc: Exception) -> None:
        log.error("enqueueing periodic jobs failed; trying again in a second", exc_info=exc)
