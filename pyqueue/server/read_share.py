"""Reads yield to writes. A server's one event loop takes work (enqueues, takes, acks) and answers
reads (listings, counts, batches, workers, history, metrics); four dashboard tabs or scripts
asking back to back would otherwise take most of the loop, and every enqueue would wait behind
them. So reads go one at a time, and while work is coming in (a write in the last `busy_s`), a
read that took t is followed by a pause of t * (1 - share) / share before the next read starts:
reads get at most `share` of the loop, and writes the rest. A quiet server answers reads at once,
back to back. Callers that read back to back are slowed down, which is what keeps their calls
(and the gRPC work each costs before any of this runs) from crowding the writers out."""

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pyqueue import defaults

# The calls that change nothing and are not on a worker's or producer's path.
READS = frozenset(
    {
        "ListJobs",
        "CountJobs",
        "ListErrors",
        "ListQueues",
        "ListCron",
        "ListWorkers",
        "ListBatches",
        "GetBatch",
        "History",
        "Metrics",
    }
)


# The calls that bring work in (with every message of the Enqueue and Take streams).
WORK = frozenset({"Enqueue", "EnqueueWorkflow", "AddToBatch"})


@dataclass(frozen=True, slots=True)
class ReadShareConfig:
    share: float = defaults.READ_SHARE  # of the loop's time, for reads, while writes come in
    busy_s: float = 0.2  # a write this recent means work is coming in
    # What a call costs grpc's Python layer before and after the handler, which the handler's own
    # time does not see (MEASURED.md: 200-300 us of server CPU a unary call).
    call_cost_s: float = 0.0003
    # The longest pause after one read. A read of megabytes (every queue's history) would
    # otherwise hold the next caller past its deadline; such reads get more than their share.
    max_pause_s: float = 2.0


class ReadShare:
    def __init__(
        self, config: ReadShareConfig = ReadShareConfig(), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self._clock = clock
        self._one = asyncio.Lock()
        self._write_at = -1e9
        self._next_at = 0.0
        self.paused_s = 0.0  # how long reads were held back, in all (for tests and metrics)

    def note_write(self) -> None:
        self._write_at = self._clock()

    def busy(self) -> bool:
        return self._clock() - self._write_at < self.config.busy_s

    def pause_for(self, spent_s: float) -> float:
        """How long a read that took `spent_s` outside the loop (the HTTP port's threads, which
        hold the interpreter while they build a page) waits before it answers, so that its
        caller's next read comes no sooner: 0 on a quiet server."""
        if not self.busy():
            return 0.0
        return self._pause(spent_s + self.config.call_cost_s)

    def _pause(self, spent_s: float) -> float:
        share = self.config.share
        return min(spent_s * (1 - share) / share, self.config.max_pause_s)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        async with self._one:
            wait = self._next_at - self._clock()
            if wait > 0 and self.busy():
                self.paused_s += wait
                await asyncio.sleep(wait)
            started = self._clock()
            try:
                yield
            finally:
                spent = self._clock() - started + self.config.call_cost_s
                self._next_at = self._clock() + self._pause(spent)
