"""One INFO line per period (a minute by default) while the server runs, so an operator tailing
the log sees it working: what happened in the period, what waits now, who is connected, and how
often the disk was synced."""

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pyqueue.engine import Engine, Status
from pyqueue.engine.services import Service

log = logging.getLogger("pyqueue.server")


@dataclass(frozen=True, slots=True)
class SummaryConfig:
    every_s: float = 60.0  # --summary-every; 0: no line


class Summaries(Service):
    name = "summary"

    def __init__(
        self,
        engine: Engine,
        workers: Callable[[], int],
        config: SummaryConfig = SummaryConfig(),
        shard: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.clock = clock
        self.workers = workers
        self.config = config
        self.shard = shard
        self._last = Counter(engine.stats)
        self._last_syncs = 0
        self._last_at = clock()

    def start(self) -> None:
        if self.config.every_s > 0:
            super().start()

    async def _idle(self, done: str | None, failed: bool) -> None:
        await asyncio.sleep(self.config.every_s)

    async def run_once(self) -> str:
        """Log the line for the period since the last one, and return it."""
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
        log.info("%s", line)
        return line
