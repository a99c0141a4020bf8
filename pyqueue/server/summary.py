"""One INFO line per period (a minute by default) while the server runs, so an operator tailing
the log sees it working: what happened in the period, what waits now, who is connected, and how
often the disk was synced."""

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

from pyqueue.engine import Engine
from pyqueue.store.records import Status

log = logging.getLogger("pyqueue.server")


class Summaries:
    def __init__(
        self,
        engine: Engine,
        workers: Callable[[], int],
        every_s: float,
        shard: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.workers = workers
        self.every_s = every_s
        self.shard = shard
        self._task: asyncio.Task[None] | None = None
        self._last = Counter(engine.stats)
        self._last_syncs = 0
        self._last_at = clock()

    def start(self) -> None:
        if self.every_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            log.info("%s", self.run_once())

    def run_once(self) -> str:
        """The line for the period since the last one."""
        engine, now = self.engine, self.clock()
        stats, syncs = Counter(engine.stats), engine.committer.syncs
        done = stats - self._last
        elapsed = max(now - self._last_at, 1e-9)
        counts = engine.memory.counts
        line = (
            f"{self.shard}last {elapsed:.0f}s: enqueued {done['enqueued']}, completed {done['acked']}, "
            f"failed {done['failed']}, timed out {done['timed_out']}; now ready "
            f"{counts.total(None, [Status.READY])}, scheduled {counts.total(None, [Status.SCHEDULED])}, "
            f"in flight {counts.total(None, [Status.IN_FLIGHT])}, dead {counts.total(None, [Status.DEAD])}; "
            f"workers {self.workers()}; fsyncs {(syncs - self._last_syncs) / elapsed:.1f}/s"
        )
        self._last, self._last_syncs, self._last_at = stats, syncs, now
        return line
