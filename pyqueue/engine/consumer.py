"""One Take stream's side of the engine: its queues, its credit and the jobs it holds.

The stream asks `next_jobs` for work. The consumer claims from the native ready set without
waiting when it has credit and something to look for; otherwise it sleeps until the dispatcher
offers a claim token it can win, an ack frees credit, the rebuild finishes, or the heartbeat is
due. No polling anywhere.
"""

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyqueue._native import ClaimToken
from pyqueue.engine.model import Failure, JobView, Outcome
from pyqueue.store.records import JobRecord

if TYPE_CHECKING:
    from pyqueue.engine.engine import Engine


class Consumer:
    def __init__(self, engine: "Engine", queues: Sequence[str], prefetch: int) -> None:
        self.engine = engine
        self.queues = tuple(dict.fromkeys(queues))
        self.prefetch = prefetch
        self.inflight: dict[int, int] = {}  # job id -> lease
        self.closed = False
        self._selection = engine.memory.ready.select(list(self.queues))
        self._claiming = 0
        self._look = True
        self._tokens: list[ClaimToken] = []
        self._waiting = False
        self._wake = asyncio.Event()
        engine.dispatcher.register(self)

    @property
    def credit(self) -> int:
        return self.prefetch - len(self.inflight) - self._claiming

    # The dispatcher's side (Listener).
    def wants_jobs(self) -> bool:
        return self._waiting and not self.closed and self.credit > 0

    def offer(self, token: ClaimToken | None) -> None:
        if token is None:
            self._look = True
        else:
            self._tokens.append(token)
        self._wake.set()

    # The committer's side (Holder).
    def delivered(self, records: Sequence[JobRecord]) -> None:
        if self.closed:
            # The stream ended while its claim was being written: straight back to the queue.
            self.engine.requeue_soon([(r.id, r.lease) for r in records], worker_lost=False)
            return
        for record in records:
            self.inflight[record.id] = record.lease

    def _credit_freed(self) -> None:
        self._look = True
        self._wake.set()

    async def next_jobs(self, timeout_s: float) -> list[JobView]:
        """Jobs to deliver, or [] once `timeout_s` passes with nothing (time for a heartbeat)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.closed:
            if self._should_look():
                jobs = await self._claim()
                if jobs:
                    return jobs
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            self._wake.clear()
            self._waiting = True
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except TimeoutError:
                return []
            finally:
                self._waiting = False
        return []

    def _should_look(self) -> bool:
        if self.credit <= 0 or not self.engine.rebuilt:
            self._tokens.clear()
            return False
        look = self._look or any(token.try_claim() for token in self._tokens)
        self._look = False
        self._tokens.clear()
        return look

    async def _claim(self) -> list[JobView]:
        want = self.credit
        job_ids = self._selection.claim(want)
        if not job_ids:
            return []
        self._claiming = len(job_ids)
        try:
            jobs = await self.engine.confirm_claim(job_ids, self)
        finally:
            self._claiming = 0
        if self._selection.has_ready():
            if len(jobs) < want:
                self._look = True  # some hints were stale: look again ourselves
            self.engine.dispatcher.announce(self.queues)  # pass the baton to the next stream
        return jobs

    async def ack(self, job_ids: Sequence[int]) -> Outcome:
        """Commit acks; call `release` once the caller has told the worker (credit opens then)."""
        return await self.engine.ack([(i, self.inflight.get(i)) for i in job_ids])

    async def fail(self, failures: Sequence[Failure]) -> Outcome:
        return await self.engine.fail([(f, self.inflight.get(f.job_id)) for f in failures])

    async def extend(self, job_ids: Sequence[int], extend_ms: int) -> list[int]:
        return await self.engine.extend([(i, self.inflight.get(i)) for i in job_ids], extend_ms)

    def release(self, outcome: Outcome) -> None:
        """Forget jobs that are finished (or whose lease is gone) and open the credit they held."""
        for job_id, _ in outcome.done:
            self.inflight.pop(job_id, None)
        for rejection in outcome.rejected:
            if rejection.code == "NOT_FOUND" or "no longer current" in rejection.message:
                self.inflight.pop(rejection.job_id, None)
        self._credit_freed()

    def close(self) -> None:
        """The stream ended: whatever it still holds goes back to ready at once."""
        if self.closed:
            return
        self.closed = True
        self.engine.dispatcher.unregister(self)
        self._wake.set()
        held, self.inflight = list(self.inflight.items()), {}
        if held:
            self.engine.requeue_soon(held, worker_lost=True)
