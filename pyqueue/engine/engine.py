"""The engine facade: every operation on jobs enters here, and so does its telemetry.

It owns the single writer (Committer), the in-memory hints (Memory), the dispatcher and the
scheduler, and it knows no transport: the gRPC servicer calls these methods and maps the
EngineErrors they raise to status codes.
"""

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyqueue.engine import recovery, requests
from pyqueue.engine.committer import Committer
from pyqueue.engine.consumer import Consumer
from pyqueue.engine.dispatcher import Dispatcher
from pyqueue.engine.errors import InvalidArgument, NotFound
from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.limits import DEFAULT_PRIORITY, DEFAULT_QUEUE, Limits
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Clock, Failure, JobView, NewJob, Outcome, system_clock
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.scheduler import Scheduler, SchedulerConfig
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import JobRecord

log = logging.getLogger("pyqueue.engine")


def _exit_now(exc: BaseException) -> None:
    logging.getLogger("pyqueue").critical("stopping at once after a storage failure: %s", exc)
    logging.shutdown()
    os._exit(70)


@dataclass(frozen=True)
class EngineConfig:
    shard: int = 0
    durable: bool = True
    limits: Limits = field(default_factory=Limits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    on_fatal: Callable[[BaseException], None] = _exit_now


class Engine:
    def __init__(
        self, store: Store, config: EngineConfig = EngineConfig(), clock: Clock = system_clock
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.dispatcher = Dispatcher()
        self.memory = Memory(self.dispatcher)
        self.ids = IdGenerator(config.shard)
        self.rebuilt = False
        self.stats: Counter[str] = Counter()
        self._committer: Committer | None = None
        self._scheduler: Scheduler | None = None
        self._rebuild: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Recover what was in flight, then serve while the in-memory sets rebuild behind."""
        loop = asyncio.get_running_loop()
        last = self.store.last_key(Family.DATA, *keys.job_range())
        self.ids.last = keys.id_suffix(last) if last else 0
        self._committer = Committer(
            self.store,
            self.clock,
            durable=self.config.durable,
            post=loop.call_soon_threadsafe,
            on_fatal=self.config.on_fatal,
        )
        self._committer.start()
        stale = recovery.in_flight_ids(self.store)
        for i in range(0, len(stale), recovery.CHUNK):
            chunk = [(job_id, None) for job_id in stale[i : i + recovery.CHUNK]]
            await self._submit(requests.Requeue(chunk, self.memory, worker_lost=False))
        if stale:
            log.info("returned %d jobs that were in flight at the last stop to ready", len(stale))
        self._scheduler = Scheduler(self.memory.scheduled, self.promote, self.clock, self.config.scheduler)
        self.memory.on_scheduled = self._scheduler.rearm
        self._scheduler.start()
        self._rebuild = loop.create_task(self._rebuild_memory(), name="pyqueue-rebuild")

    async def _rebuild_memory(self) -> None:
        started = time.perf_counter()
        try:
            ready, scheduled = await asyncio.to_thread(recovery.rebuild, self.store, self.memory)
        except Exception as exc:
            # Without its in-memory sets the server can never deliver: stop rather than hang.
            log.critical("rebuilding the in-memory sets failed", exc_info=exc)
            self.config.on_fatal(exc)
            raise
        self.rebuilt = True
        log.info(
            "rebuilt the in-memory sets: %d ready, %d scheduled jobs in %.2fs",
            ready,
            scheduled,
            time.perf_counter() - started,
        )
        self.dispatcher.wake_all()
        next_due = self.memory.scheduled.next_due()
        if next_due is not None and self._scheduler is not None:
            self._scheduler.rearm(next_due)

    async def wait_rebuilt(self) -> None:
        if self._rebuild is not None:
            await asyncio.shield(self._rebuild)

    async def stop(self) -> None:
        """Finish what was submitted, then stop the writer. The store is the caller's to close."""
        if self._scheduler is not None:
            await self._scheduler.stop()
        if self._rebuild is not None and not self._rebuild.done():
            await asyncio.gather(self._rebuild, return_exceptions=True)
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._committer is not None:
            await asyncio.to_thread(self._committer.stop)
            # Completions posted by the writer's last batches run on this loop: let them.
            await asyncio.sleep(0)

    async def _submit(self, request: Any) -> Any:
        assert self._committer is not None, "the engine is not started"
        self._committer.submit(request)
        return await request.future

    # Producers.
    def new_job(
        self, index: int, type_: str, queue: str, priority: int | None, payload: bytes, content_type: str = ""
    ) -> NewJob:
        """Validate one job of an enqueue request against the limits."""
        limits = self.config.limits
        limits.check_name(f"job {index}: type", type_)
        queue = queue or DEFAULT_QUEUE
        limits.check_name(f"job {index}: queue", queue)
        priority = DEFAULT_PRIORITY if priority is None else priority
        limits.check_priority(index, priority)
        limits.check_payload(index, len(payload))
        limits.check_content_type(index, content_type)
        return NewJob(type_, queue, priority, payload, content_type)

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[int]:
        self.config.limits.check_batch_size(len(jobs))
        ids: list[int] = await self._submit(requests.Enqueue(jobs, self.ids, self.memory))
        self.stats["enqueued"] += len(ids)
        return ids

    # Readers.
    def get_job(self, job_id: int) -> JobView:
        raw = self.store.get(Family.DATA, keys.job_key(job_id))
        if raw is None:
            raise NotFound(f"job {job_id} does not exist (it may have completed and been deleted)")
        payload = self.store.get(Family.DATA, keys.payload_key(job_id)) or b""
        return JobView(JobRecord.decode(job_id, raw), payload)

    # Workers.
    def consumer(self, queues: Sequence[str], prefetch: int) -> Consumer:
        limits = self.config.limits
        if not queues:
            raise InvalidArgument("subscribe to at least one queue")
        if len(queues) > limits.max_queues_per_stream:
            raise InvalidArgument(
                f"{len(queues)} queues on one stream; the limit is {limits.max_queues_per_stream}"
            )
        for queue in queues:
            limits.check_name("queue", queue)
        limits.check_prefetch(prefetch)
        return Consumer(self, queues, prefetch)

    async def confirm_claim(self, job_ids: Sequence[int], holder: Consumer) -> list[JobView]:
        jobs: list[JobView] = await self._submit(requests.Claim(job_ids, holder, self.memory))
        self.stats["delivered"] += len(jobs)
        return jobs

    async def ack(self, leases: Sequence[tuple[int, int | None]]) -> Outcome:
        outcome: Outcome = await self._submit(requests.Ack(leases))
        self.stats["acked"] += len(outcome.done)
        self.stats["ack_rejected"] += len(outcome.rejected)
        return outcome

    async def fail(self, failures: Sequence[tuple[Failure, int | None]]) -> Outcome:
        request = requests.Fail(failures, self.memory, self.config.retry)
        outcome: Outcome = await self._submit(request)
        self.stats["failed"] += len(outcome.done)
        return outcome

    async def requeue(self, leases: Sequence[tuple[int, int | None]], *, worker_lost: bool) -> list[int]:
        ids: list[int] = await self._submit(requests.Requeue(leases, self.memory, worker_lost=worker_lost))
        self.stats["requeued"] += len(ids)
        return ids

    def requeue_soon(self, leases: Sequence[tuple[int, int | None]], *, worker_lost: bool) -> None:
        task = asyncio.get_running_loop().create_task(self.requeue(leases, worker_lost=worker_lost))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def promote(self, due: Sequence[tuple[int, int]]) -> list[int]:
        ids: list[int] = await self._submit(requests.Promote(due, self.memory))
        self.stats["promoted"] += len(ids)
        return ids

    @property
    def committer(self) -> Committer:
        assert self._committer is not None
        return self._committer
