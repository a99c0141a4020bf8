"""The engine facade: every operation on jobs enters here, and so does its telemetry.

It owns the single writer (Committer), the in-memory hints (Memory), the dispatcher and the timed
services (scheduler, reaper, purger), and it knows no transport: the gRPC servicer calls these
methods and maps the EngineErrors they raise to status codes.
"""

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pyqueue import failpoints
from pyqueue.engine import fair_weights, query, queue_limits, ranges, rebuild, recovery, requests
from pyqueue.engine.committer import Committer
from pyqueue.engine.config import EngineConfig
from pyqueue.engine.consumer import Consumer
from pyqueue.engine.cron_entry import CronEntry, check_schedule
from pyqueue.engine.disk import DiskGuard
from pyqueue.engine.dispatcher import Dispatcher
from pyqueue.engine.errors import EngineError, InvalidArgument, NotFound
from pyqueue.engine.flows import Flows
from pyqueue.engine.history import StepCounts
from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.limits import DEFAULT_PRIORITY, DEFAULT_QUEUE
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import (
    Changes,
    Clock,
    Ending,
    ErrorEntry,
    Failure,
    JobView,
    NewJob,
    Outcome,
    UniqueScope,
    scoped_unique_key,
    system_clock,
)
from pyqueue.engine.payloads import payload_problem
from pyqueue.engine.queue_limits import QueueLimit
from pyqueue.engine.requests.producers import check_fold
from pyqueue.engine.retry import JobOptions
from pyqueue.engine.services import (
    AlarmClock,
    CronService,
    DurableMarker,
    FlowSweeper,
    Purger,
    Reaper,
    Scheduler,
    cron,
)
from pyqueue.engine.telemetry import WAIT_SECONDS, Telemetry
from pyqueue.engine.workflows import Workflows
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import ENDED, JobRecord, Status

T = TypeVar("T")
SLICE = 500  # jobs per write for acks, fails and bulk changes (see `_in_chunks`)

log = logging.getLogger("pyqueue.engine")


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
        self.delivering = False  # every lane's head is loaded: claims may start (rebuild.py)
        self.rebuilt = False
        self.stats: Counter[str] = Counter()
        self.telemetry = Telemetry(StepCounts(WAIT_SECONDS, clock=lambda: clock() / 1000))
        self.services: list[AlarmClock] = [
            Scheduler(self.memory, self._submit, self.stats, clock, config.alarms),
            Reaper(self.memory, self._submit, self.stats, clock, config.alarms, retry=config.retry),
            Purger(self.memory, self._submit, self.stats, clock, config.alarms),
        ]
        self.memory.on_scheduled, self.memory.on_deadline, self.memory.on_expiring = (
            s.rearm for s in self.services
        )
        self.cron = CronService(self._cron_tick, clock)
        self.flows = Flows(
            config.shard,
            self.ids,
            config.retry,
            config.queue_shard or (lambda queue: config.shard),
            config.limits.max_payload_bytes,
        )
        self.workflows = Workflows(store, self.flows, self._submit, self.memory, config.retry, config.limits)
        self.sweeper = FlowSweeper(self._submit)
        store_dir = getattr(store, "path", None)
        self.marker = DurableMarker(store, Path(store_dir)) if store_dir is not None else None
        self.queue_limits: dict[str, QueueLimit] = {}
        self.fair_weights: dict[str, dict[str, int]] = {}  # queue -> key -> weight (not 1)
        self._fair_lock = asyncio.Lock()  # one weight change at a time: each replaces the map
        self._loop: asyncio.AbstractEventLoop | None = None
        self.disk = DiskGuard(getattr(store, "path", "."), config.min_free_bytes)
        self._committer: Committer | None = None
        self._rebuild: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}  # WaitJob: job id -> waiting calls
        self.memory.on_ended = self._wake_waiters
        self.memory.on_cancel = self._tell_holders

    # Life cycle.
    async def start(self, *, services: bool = True) -> None:
        """Recover what was in flight, then serve while the in-memory sets rebuild behind.

        `services=False` leaves the timed services stopped, for tests that drive `run_once`."""
        loop = self._loop = asyncio.get_running_loop()
        rekeyed = recovery.rekey_ready(self.store)
        if rekeyed:
            log.info("rewrote %d ready index keys in run order (a store from an older version)", rekeyed)
        last = self.store.last_key(Family.DATA, *keys.job_range())
        self.ids.last = keys.id_suffix(last) if last else 0
        self.workflows.open()
        self._committer = Committer(
            self.store,
            self.clock,
            durable=self.config.durable,
            post=loop.call_soon_threadsafe,
            post_here=loop.call_soon if self.config.inline_commits else None,
            on_fatal=self.config.on_fatal,
            counts=self.memory.counts,
            telemetry=self.telemetry,
            on_left_flight=self._left_flight,
            flows=self.flows,
        )
        self._committer.start()
        stale = recovery.in_flight_ids(self.store)
        for i in range(0, len(stale), recovery.CHUNK):
            await self.hand_back(
                [(job_id, None, Ending.RECOVERED) for job_id in stale[i : i + recovery.CHUNK]]
            )
        if stale:
            log.info("returned %d jobs that were in flight at the last stop to ready", len(stale))
        self.queue_limits = queue_limits.load(self.store)
        for queue, limit in self.queue_limits.items():  # nothing is in flight yet: recovery is done
            queue_limits.apply(self.memory.ready, queue, limit, 0)
        self.fair_weights = fair_weights.load(self.store)
        for queue, weights in self.fair_weights.items():
            fair_weights.apply(self.memory.ready, queue, {}, weights)
        self.cron.entries = cron.load(self.store)
        if services:
            for service in (*self.services, self.cron, self.marker, self.sweeper):
                if service is not None:
                    service.start()
        self._rebuild = loop.create_task(self._rebuild_memory(), name="pyqueue-rebuild")

    async def _rebuild_memory(self) -> None:
        started = time.perf_counter()
        loop = asyncio.get_running_loop()

        def announce(queue: str) -> None:
            loop.call_soon_threadsafe(self.dispatcher.announce, (queue,))

        try:
            taken: rebuild.Snapshot = await self._submit(requests.OpenSnapshot(self.memory))
            loading = await asyncio.to_thread(rebuild.load_heads, self.store, self.memory)
            self.delivering = True
            self.dispatcher.wake_all()
            log.info(
                "delivering after %.3fs; loading the ready jobs of %d queues behind",
                time.perf_counter() - started,
                len(loading),
            )
            await asyncio.to_thread(failpoints.wait, "rebuild")
            ready = await asyncio.to_thread(rebuild.load_ready, self.memory, taken.ready, announce)
            scheduled = await asyncio.to_thread(rebuild.load_others, self.memory, taken.others)
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
        for service, timers in zip(
            self.services, (self.memory.scheduled, self.memory.deadlines, self.memory.expiring), strict=True
        ):
            next_due = timers.next_due()
            if next_due is not None:
                service.rearm(next_due)

    async def wait_rebuilt(self) -> None:
        if self._rebuild is not None:
            await asyncio.shield(self._rebuild)

    async def stop(self) -> None:
        """Finish what was submitted, then stop the writer. The store is the caller's to close."""
        for service in self.services:
            await service.stop()
        await self.cron.stop()
        await self.sweeper.stop()
        if self._rebuild is not None and not self._rebuild.done():
            await asyncio.gather(self._rebuild, return_exceptions=True)
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._committer is not None:
            self._committer.hand_over()
            await asyncio.to_thread(self._committer.stop)
            await asyncio.sleep(0)  # let the completions the writer posted last run
        if self.marker is not None:
            await self.marker.stop()

    async def _submit(self, request: Any) -> Any:
        assert self._committer is not None, "the engine is not started"
        self._committer.submit(request)
        return await request.future

    # Producers.
    def check_batch(self, n: int) -> None:
        self.config.limits.check_batch_size(n)

    def new_job(
        self,
        index: int,
        type_: str,
        queue: str,
        priority: int | None,
        payload: bytes,
        content_type: str = "",
        *,
        run_at_ms: int = 0,
        delay_ms: int = 0,
        max_retries: int | None = None,
        timeout_ms: int = 0,
        backoff: tuple[float, float, float] | None = None,
        keep_completed_ms: int | None = None,
        unique_key: str = "",
        unique_scope: int = UniqueScope.QUEUED,
        headers: dict[str, str] | None = None,
        keep_result_ms: int | None = None,
        limit_key: str = "",
        unique_in_queue: bool = False,
        fold_key: str = "",
        fold_max: int = 0,
        fair_key: str = "",
        completed_result: bytes | None = None,
    ) -> NewJob:
        """Validate one job of an enqueue request against the limits. Every enqueued job passes
        here: the checks of fields left at 0 or None (in every range) are skipped."""
        limits = self.config.limits
        queue = queue or DEFAULT_QUEUE
        limits.check_job_names(index, type_, queue)
        priority = DEFAULT_PRIORITY if priority is None else priority
        limits.check_priority(index, priority)
        limits.check_payload(index, len(payload))
        limits.check_content_type(index, content_type)
        problem = payload_problem(content_type, payload)
        if problem:
            raise InvalidArgument(f"job {index}: {problem}")
        if run_at_ms and delay_ms:
            raise InvalidArgument(f"job {index}: give run_at or delay, not both")
        where = f"job {index}: "
        for name, value in (
            ("run_at_ms", run_at_ms),
            ("delay_ms", delay_ms),
            ("timeout_ms", timeout_ms),
            ("max_retries", max_retries),
            ("keep_completed_ms", keep_completed_ms),
            ("keep_result_ms", keep_result_ms),
        ):
            if value:  # 0 and None (not given) pass every range
                ranges.check(name, value, where)
        ranges.check_backoff(backoff, where)
        if unique_key and (len(unique_key.encode()) > 256 or not unique_key.isprintable()):
            raise InvalidArgument(
                f"job {index}: the unique key must be printable (no control characters) and at most 256 bytes"
            )
        if unique_key and (unique_in_queue or self.config.unique_per_queue):
            unique_key = scoped_unique_key(queue, unique_key)
        if unique_scope not in (UniqueScope.QUEUED, UniqueScope.ACTIVE, UniqueScope.EXISTS):
            raise InvalidArgument(f"job {index}: unique scope {unique_scope} is not queued, active or exists")
        if headers:
            limits.check_headers(index, headers)
        if limit_key:
            limits.check_job_key(where, "limit key", limit_key)
        if fair_key:
            limits.check_job_key(where, "fair key", fair_key)
            if limit_key:
                raise InvalidArgument(
                    f"job {index}: give a fair key or a limit key, not both (a fair key under a per-key cap "
                    "is not supported yet)"
                )
        if fold_key or fold_max:
            fold_max = check_fold(index, fold_key, fold_max, content_type, unique_key)
        if completed_result is not None:
            keep_result_ms = self._check_record(
                index, completed_result, run_at_ms or delay_ms, fold_key, keep_result_ms
            )
        options = b""
        if backoff is not None or keep_completed_ms is not None or headers or keep_result_ms is not None:
            options = JobOptions(backoff, keep_completed_ms, headers or None, keep_result_ms).encode()
        return NewJob(
            type_,
            queue,
            priority,
            payload,
            content_type,
            run_at_ms=run_at_ms or (self.clock() + delay_ms if delay_ms else 0),
            max_retries=-1 if max_retries is None else max_retries,
            timeout_ms=timeout_ms,
            options=options,
            unique_key=unique_key,
            unique_scope=unique_scope,
            limit_key=limit_key,
            fold_key=fold_key,
            fold_max=fold_max,
            fair_key=fair_key,
            completed_result=completed_result,
        )

    def _check_record(
        self, index: int, result: bytes, when: int, fold_key: str, keep_result_ms: int | None
    ) -> int:
        """A record of a job run elsewhere (NewJob.completed_result): its result is kept as an
        ack's is, for its keep_result_ms (or the server's --keep-completed, when that keeps any)."""
        self.config.limits.check_payload(index, len(result))
        problem = payload_problem("application/json", result)
        if problem:
            raise InvalidArgument(f"job {index}: completed_result: {problem}")
        if when or fold_key:
            raise InvalidArgument(
                f"job {index}: a completed record is stored done at once: give it no run_at, delay or fold key"
            )
        keep_ms = self.config.retry.keep_completed_ms if keep_result_ms is None else keep_result_ms
        if keep_ms <= 0:
            raise InvalidArgument(
                f"job {index}: a completed record needs keep_result_ms above 0 (this server keeps no "
                "completed job by default: --keep-completed 0)"
            )
        return keep_ms

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[tuple[int, bool]]:
        """Returns (id, duplicate) per job: a duplicate unique job is the existing one."""
        return await self.submit_enqueue(jobs)

    def submit_enqueue(self, jobs: Sequence[NewJob]) -> "asyncio.Future[list[tuple[int, bool]]]":
        """`enqueue` without a coroutine: the checks now (EngineError), the write handed to the
        writer, the (id, duplicate) pairs once durable. Writes submitted in one turn of the loop
        go in one commit (the native front submits a whole batch of requests so)."""
        self.check_batch(len(jobs))
        self.disk.check()
        assert self._committer is not None, "the engine is not started"
        started = time.perf_counter()
        request = requests.Enqueue(
            jobs, self.ids, self.memory, self.config.limits.max_payload_bytes, self.config.retry
        )
        self._committer.submit(request)
        future: asyncio.Future[list[tuple[int, bool]]] = request.future
        future.add_done_callback(lambda done: self._enqueued(done, started))
        return future

    def _enqueued(self, done: "asyncio.Future[list[tuple[int, bool]]]", started: float) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        self.telemetry.enqueue_seconds.observe(time.perf_counter() - started)
        self.stats["enqueued"] += sum(1 for _, duplicate in done.result() if not duplicate)

    # Readers.
    def get_job(self, job_id: int) -> JobView:
        raw = self.store.get(Family.DATA, keys.job_key(job_id))
        if raw is None:
            raise NotFound(f"job {job_id} does not exist (it may have completed and been deleted)")
        payload = self.store.get(Family.DATA, keys.payload_key(job_id)) or b""
        record = JobRecord.decode(job_id, raw)
        result = None
        wants_result = record.options and JobOptions.decode(record.options).keep_result_ms is not None
        if record.status == Status.COMPLETED and wants_result:
            result = self.store.get(Family.DATA, keys.result_key(job_id))
        return JobView(record, payload, result)

    def job_by_key(self, queue: str, unique_key: str) -> JobView:
        """The job that last took `unique_key` in `queue` (GetJobRequest.unique_key)."""
        if not queue or not unique_key:
            raise InvalidArgument("GetJob by unique key needs both the unique_key and its queue")
        self.config.limits.check_name("queue", queue)
        if len(unique_key.encode()) > 256 or not unique_key.isprintable():
            raise InvalidArgument(
                "the unique key must be printable (no control characters) and at most 256 bytes"
            )
        for stored in (scoped_unique_key(queue, unique_key), unique_key):  # held within the queue, or not
            raw = self.store.get(Family.INDEX, keys.unique_key(stored))
            if raw is None:
                continue
            with contextlib.suppress(NotFound):
                view = self.get_job(int.from_bytes(raw, "big"))
                if view.record.queue == queue:
                    return view
        raise NotFound(f"no job in queue {queue!r} holds the unique key {unique_key!r}")

    def job_queues(self, job_ids: list[int]) -> dict[int, str]:
        """The queue of each job that exists, by id: one read of their records, no payloads."""
        raws = self.store.get_many(Family.DATA, [keys.job_key(i) for i in job_ids])
        return {i: JobRecord.decode(i, raw).queue for i, raw in zip(job_ids, raws, strict=True) if raw}

    async def wait_job(self, job_id: int, timeout_s: float) -> JobView:
        """The job once it is completed or dead, or as it is after `timeout_s`. Woken by the commit
        that ends it (`_wake_waiters`), never by polling."""
        ended = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(ended)
        try:
            view = self.get_job(job_id)  # after registering: an end committed from here on wakes us
            if view.record.status in ENDED:
                return view
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await ended
            return self.get_job(job_id)
        finally:
            waiting = self._waiters.get(job_id)
            if waiting is not None:
                waiting.remove(ended)
                if not waiting:
                    del self._waiters[job_id]

    def _left_flight(self, by_queue: dict[str, int], keyed: dict[str, list[int]]) -> None:
        """From the writer, after a commit: jobs left flight; a limited queue may give out more."""
        ready = self.memory.ready
        limited = [queue for queue, n in by_queue.items() if ready.finished(queue, n, keyed.get(queue, []))]
        if limited and self._loop is not None:
            self._loop.call_soon_threadsafe(self.dispatcher.announce, limited)

    def _tell_holders(self, running: list[tuple[str, int]]) -> None:
        """Jobs in flight were cancelled: tell the streams that hold them."""
        for queue, job_id in running:
            for listener in self.dispatcher.listeners(queue):
                if isinstance(listener, Consumer) and job_id in listener.held:
                    listener.cancel([job_id])

    def _wake_waiters(self, job_ids: list[int]) -> None:
        if not self._waiters:
            return
        for job_id in job_ids:
            for ended in self._waiters.get(job_id, ()):
                if not ended.done():
                    ended.set_result(None)

    def list_errors(self, job_id: int) -> list[ErrorEntry]:
        self.get_job(job_id)  # NOT_FOUND for a job that does not exist
        return [
            ErrorEntry.from_json(value)
            for _, value in self.store.scan(Family.DATA, *keys.error_range(job_id))
        ]

    # Seeing and steering. Reads run off the event loop so a listing never holds up takes.
    def check_filter(self, f: query.JobFilter) -> None:
        limits = self.config.limits
        limits.check_filter("queues", len(f.queues))
        limits.check_filter("types", len(f.types))
        for queue in f.queues:
            limits.check_name("filter: queue", queue)
        for type_ in f.types:
            limits.check_name("filter: type", type_)

    async def list_jobs(self, f: query.JobFilter, limit: int, descending: bool, cursor: str) -> query.Page:
        self.check_filter(f)
        return await asyncio.to_thread(query.list_jobs, self.store, f, limit, descending, cursor)

    async def count_jobs(self, f: query.JobFilter) -> int:
        self.check_filter(f)
        await self.wait_rebuilt()  # counts grow while the start-up rebuild loads: wait for whole ones
        return await asyncio.to_thread(query.count_jobs, self.store, self.memory.counts, f)

    def oldest_ready_ms(self, queue: str) -> int | None:
        """When the queue's oldest ready job (by creation) became ready; None if none is."""
        lo = keys.queue_prefix(queue, Status.READY)
        first = next(self.store.scan(Family.INDEX, lo, lo + b"\xff" * 9), None)
        if first is None:
            return None
        raw = self.store.get(Family.DATA, keys.job_key(keys.id_suffix(first[0])))
        return JobRecord.decode(keys.id_suffix(first[0]), raw).updated_ms if raw else None

    def queues(self) -> list[tuple[str, bool, dict[str, int], QueueLimit]]:
        counts = self.memory.counts.by_queue()
        names = set(counts) | {q for q in self.memory.ready.queues() if self.memory.ready.is_paused(q)}
        names |= set(self.queue_limits)
        return [
            (q, self.memory.ready.is_paused(q), counts.get(q, {}), self.queue_limits.get(q, QueueLimit()))
            for q in sorted(names)
        ]

    def check_changes(self, changes: Changes) -> None:
        """The same checks as an enqueue, for the fields a change sets."""
        if changes == Changes():
            raise InvalidArgument(
                "the update changes nothing: set queue, priority, run_at (or clear_run_at), "
                "max_retries, backoff, keep_completed_ms, payload or content_type"
            )
        limits = self.config.limits
        if changes.queue is not None:
            limits.check_name("queue", changes.queue)
        if changes.priority is not None:
            limits.check_priority(0, changes.priority)
        if changes.payload is not None:
            limits.check_payload(0, len(changes.payload))
        if changes.content_type is not None:
            limits.check_content_type(0, changes.content_type)
            if changes.payload is not None:  # else each job's own is checked as it is changed
                problem = payload_problem(changes.content_type, changes.payload)
                if problem:
                    raise InvalidArgument(problem)
        if changes.max_retries is not None:
            ranges.check("max_retries", changes.max_retries)
        if changes.run_at_ms is not None:
            ranges.check("run_at_ms", changes.run_at_ms)
        if changes.options is not None:
            options = JobOptions.decode(changes.options)
            ranges.check_backoff(options.backoff)
            if options.keep_completed_ms is not None:
                ranges.check("keep_completed_ms", options.keep_completed_ms)
        if changes.clear_run_at and changes.run_at_ms is not None:
            raise InvalidArgument("give run_at or clear_run_at, not both")

    async def _targets(self, f: query.JobFilter) -> list[int]:
        self.check_filter(f)
        only_ids = f.ids and not (f.queues or f.types or f.statuses or f.has_ranges)
        if only_ids:
            return list(dict.fromkeys(f.ids))  # missing ids are reported, not silently skipped
        if f == query.JobFilter():
            raise InvalidArgument(
                "a change by filter needs at least one condition (ids, queues, types, statuses)"
            )
        return await asyncio.to_thread(query.matching_ids, self.store, f)

    async def update_jobs(self, f: query.JobFilter, changes: Changes) -> Outcome:
        self.check_changes(changes)
        return await self._in_chunks(
            await self._targets(f), lambda ids: requests.UpdateJobs(ids, changes, self.memory)
        )

    async def retry_jobs(self, f: query.JobFilter) -> Outcome:
        """Dead jobs back to ready (a filter without statuses means the dead ones it matches)."""
        if f.statuses and set(f.statuses) != {Status.DEAD}:
            raise InvalidArgument("only dead jobs can be retried: leave out the status, or give status dead")
        if not f.statuses and not (f.ids and not (f.queues or f.types or f.has_ranges)):
            f = dataclasses.replace(f, statuses=(Status.DEAD,))
        return await self._in_chunks(
            await self._targets(f), lambda ids: requests.RetryJobs(ids, self.memory, self.config.retry)
        )

    async def cancel_jobs(self, f: query.JobFilter) -> Outcome:
        """Cancel jobs (a filter without statuses means the waiting and running ones it matches)."""
        if not f.statuses and not (f.ids and not (f.queues or f.types or f.has_ranges)):
            f = dataclasses.replace(f, statuses=(Status.SCHEDULED, Status.READY, Status.IN_FLIGHT))
        return await self._in_chunks(
            await self._targets(f), lambda ids: requests.CancelJobs(ids, self.memory, self.config.retry)
        )

    async def delete_jobs(self, f: query.JobFilter) -> Outcome:
        return await self._in_chunks(
            await self._targets(f), lambda ids: requests.DeleteJobs(ids, self.memory)
        )

    async def _in_chunks(self, items: Sequence[T], make: Callable[[list[T]], Any]) -> Outcome:
        """One write per slice of SLICE jobs, one after the other: a large request (a bulk change,
        an ack of a whole prefetch) never holds the single writer for more than a few ms, and
        other clients' writes go in between."""
        if len(items) <= SLICE:
            one: Outcome = await self._submit(make(list(items)))
            return one
        total = Outcome(done=[], rejected=[])
        for i in range(0, len(items), SLICE):
            outcome: Outcome = await self._submit(make(list(items[i : i + SLICE])))
            total.done.extend(outcome.done)
            total.rejected.extend(outcome.rejected)
        return total

    # Periodic jobs (cron.py).
    def cron_entry(self, name: str, schedule: str, timezone: str, job: NewJob) -> CronEntry:
        """Validate one periodic job (its job through `new_job` first)."""
        self.config.limits.check_name("periodic job name", name)
        check_schedule(schedule, timezone, self.clock())
        return CronEntry(name, schedule, timezone or "UTC", job)

    async def set_cron(self, entries: Sequence[CronEntry]) -> list[CronEntry]:
        if len({e.name for e in entries}) != len(entries):
            raise InvalidArgument("two periodic jobs with the same name in one request")
        saved: list[CronEntry] = await self._submit(requests.SetCron(entries))
        for entry in saved:
            self.cron.changed(entry)
        return saved

    async def change_cron(self, name: str, action: str) -> CronEntry:
        if action not in ("pause", "resume", "delete"):
            raise InvalidArgument(f"unknown action {action!r}: pause, resume or delete")
        entry: CronEntry = await self._submit(requests.ChangeCron(name, action))
        self.cron.changed(entry, deleted=action == "delete")
        return entry

    def list_cron(self) -> list[CronEntry]:
        return sorted(self.cron.entries.values(), key=lambda e: e.name)

    def cron_queue(self, name: str) -> str | None:
        """The queue a periodic job enqueues into (None: no such entry)."""
        entry = self.cron.entries.get(name)
        return None if entry is None else entry.job.queue

    async def _cron_tick(self, entry: CronEntry, tick_ms: int, missed: int) -> int | None:
        """Enqueue one tick's job; its headers say which entry and tick, and what was missed."""
        options = JobOptions.decode(entry.job.options)
        headers = {**(options.headers or {}), "pyqueue-cron": entry.name, "pyqueue-cron-tick": str(tick_ms)}
        if missed:
            headers["pyqueue-cron-missed"] = str(missed)
        job = dataclasses.replace(
            entry.job, run_at_ms=0, options=dataclasses.replace(options, headers=headers).encode()
        )
        created: list[tuple[int, bool]] | None = await self._submit(
            requests.CronTick(entry.name, tick_ms, job, self.ids, self.memory)
        )
        return created[0][0] if created else None

    async def set_queue_limit(self, queue: str, limit: QueueLimit) -> None:
        self.config.limits.check_name("queue", queue)
        limit.check()
        await self._submit(requests.SetQueueLimit(queue, limit, self.memory))
        if limit.is_set:
            self.queue_limits[queue] = limit
        else:
            self.queue_limits.pop(queue, None)

    async def set_fair_weight(self, queue: str, fair_key: str, weight: int) -> None:
        self.config.limits.check_name("queue", queue)
        if fair_key:
            self.config.limits.check_job_key("", "fair key", fair_key)
        async with self._fair_lock:
            before = self.fair_weights.get(queue, {})
            after = fair_weights.changed(before, fair_key, weight)
            await self._submit(requests.SetFairWeights(queue, before, after, self.memory))
            if after:
                self.fair_weights[queue] = after
            else:
                self.fair_weights.pop(queue, None)

    def fair_keys(self, queue: str, limit: int) -> tuple[int, list[fair_weights.KeyWaiting], dict[str, int]]:
        """(how many keys have jobs waiting, the busiest of them, the weights set)."""
        self.config.limits.check_name("queue", queue)
        weights = self.fair_weights.get(queue, {})
        busiest = fair_weights.busiest(self.memory.ready, queue, limit, weights, self.clock())
        return self.memory.ready.fair_key_count(queue), busiest, dict(weights)

    async def set_paused(self, queue: str, paused: bool) -> None:
        self.config.limits.check_name("queue", queue)
        await self._submit(requests.PauseQueue(queue, paused, self.memory))

    # Workers.
    def consumer(self, queues: Sequence[str], prefetch: int, *, reports_starts: bool = False) -> Consumer:
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
        return Consumer(
            self, queues, prefetch, reports_starts=reports_starts, max_bytes=limits.max_stream_bytes
        )

    async def confirm_claim(self, job_ids: Sequence[int], holder: Consumer) -> list[JobView]:
        budget = max(holder.max_bytes - holder.held_bytes, 1)
        jobs: list[JobView] = await self._submit(requests.Claim(job_ids, holder, self.memory, budget))
        self.stats["delivered"] += len(jobs)
        return jobs

    async def ack(
        self, leases: Sequence[tuple[int, int]], results: dict[int, bytes] | None = None
    ) -> Outcome:
        """Complete jobs; `results` holds the return values (JSON) of those that keep them."""
        outcome = await self._in_chunks(
            leases, lambda part: requests.Ack(part, self.memory, self.config.retry, results)
        )
        self.stats["acked"] += len(outcome.done)
        self.stats["ack_rejected"] += len(outcome.rejected)
        return outcome

    async def fail(self, failures: Sequence[tuple[Failure, int]]) -> Outcome:
        outcome = await self._in_chunks(
            failures, lambda part: requests.Fail(part, self.memory, self.config.retry)
        )
        self.stats["failed"] += len(outcome.done)
        return outcome

    async def set_deadlines(self, deadlines: Sequence[tuple[int, int, int]]) -> list[int]:
        """(id, lease, deadline ms) for attempts in flight: started, or extended."""
        ids: list[int] = await self._submit(requests.SetDeadlines(deadlines, self.memory))
        return ids

    def mark_started_soon(self, deadlines: Sequence[tuple[int, int, int]], started_ms: int) -> None:
        """(id, lease, deadline ms or 0) for attempts their worker began at `started_ms`."""
        # Straight to the writer, no task: this runs for every start message of every worker.
        request = requests.SetDeadlines(deadlines, self.memory, started_ms)
        assert self._committer is not None, "the engine is not started"
        try:
            self._committer.submit(request)
        except EngineError:
            return  # shutting down: the start is taken as not started, which is safe
        self._in_background(request.future)

    async def hand_back(
        self, items: Sequence[tuple[int, int | None, Ending]], delay_ms: int = 0
    ) -> list[int]:
        """Attempts in flight back to the queue, each by how it ended (see requests/handback.py)."""
        ids: list[int] = await self._submit(
            requests.HandBack(items, self.memory, self.config.retry, delay_ms)
        )
        for _, _, ending in items:
            self.stats[f"handed_back_{ending.name.lower()}"] += 1
        return ids

    def hand_back_soon(self, items: Sequence[tuple[int, int | None, Ending]]) -> None:
        self._in_background(self.hand_back(items))

    async def wait_background(self) -> None:
        """Wait for the writes started in the background (hand-backs, deadlines) to finish."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def _in_background(self, work: Any) -> None:
        """A write nobody waits for (a coroutine, or a request's future): kept until it is done,
        so that `stop` and `wait_background` can wait for it, and its failure is logged."""
        future = asyncio.ensure_future(work)
        self._background.add(future)
        future.add_done_callback(_settled_in_background)
        future.add_done_callback(self._background.discard)

    @property
    def committer(self) -> Committer:
        assert self._committer is not None
        return self._committer


def _settled_in_background(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("a background write failed: %s", future.exception())
