"""The writes, one class each: read, check, write (in the single writer), then complete (on the loop).

`apply` runs in the writer thread against a BatchView and must raise before it writes anything
to refuse. `complete` runs where callers wait, after the commit (and its fsync where `needs_sync`):
it updates the in-memory hints, then answers. Memory effects run even when the caller has gone
away: memory must follow the disk.
"""

import asyncio
import json
import random
from collections.abc import Sequence
from typing import Any, Protocol

from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Failure, JobView, NewJob, Outcome, Rejection
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import JobRecord, Status


class _Request:
    needs_sync = True

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.error: BaseException | None = None
        self.result: Any = None

    def on_commit(self) -> None:
        """Memory effects of a successful commit."""

    def on_error(self) -> None:
        """Undo what was taken from memory before a failed commit."""

    def complete(self) -> None:
        if self.error is None:
            self.on_commit()
        else:
            self.on_error()
        if self.future.cancelled():
            return
        if self.error is None:
            self.future.set_result(self.result)
        else:
            self.future.set_exception(self.error)


class Enqueue(_Request):
    def __init__(self, jobs: Sequence[NewJob], ids: IdGenerator, memory: Memory) -> None:
        super().__init__()
        self.jobs = jobs
        self.ids = ids
        self.memory = memory
        self.records: list[JobRecord] = []

    def apply(self, view: BatchView) -> None:
        now = view.now_ms
        for job in self.jobs:
            record = JobRecord(
                id=self.ids.next(now),
                status=Status.READY,
                queue=job.queue,
                type=job.type,
                priority=job.priority,
                created_ms=now,
                updated_ms=now,
                content_type=job.content_type,
            )
            view.create(record, job.payload)
            self.records.append(record)
        self.result = [r.id for r in self.records]

    def on_commit(self) -> None:
        self.memory.became_ready(self.records)


class Holder(Protocol):
    """What a claimer must provide: where its leases are recorded."""

    def delivered(self, records: Sequence[JobRecord]) -> None: ...


class Claim(_Request):
    """Mark ready jobs in flight for one stream. The ids were already removed from the ready set:
    that removal was the claim; this is the compare-and-swap that confirms it on disk."""

    needs_sync = False

    def __init__(self, job_ids: Sequence[int], holder: Holder, memory: Memory) -> None:
        super().__init__()
        self.job_ids = job_ids
        self.holder = holder
        self.memory = memory
        self.taken: list[JobRecord] = []

    def apply(self, view: BatchView) -> None:
        deliveries = []
        for record in view.records(self.job_ids):
            if record is None or record.status != Status.READY:
                continue  # a stale hint: deleted, moved or changed since it was queued
            before = indexed(record)
            record.status = Status.IN_FLIGHT
            record.attempts += 1
            record.lease = (record.lease + 1) & 0xFFFFFFFF
            view.save(record, before)
            # A snapshot: the writer may change the cached record again while the loop sends this one.
            self.taken.append(record.clone())
        for record, payload in zip(self.taken, view.payloads([r.id for r in self.taken]), strict=True):
            deliveries.append(JobView(record, payload))
        self.result = deliveries

    def on_commit(self) -> None:
        self.holder.delivered(self.taken)

    def on_error(self) -> None:
        # The keys left memory but the write failed: give them back so another stream can try.
        self.memory.became_ready(r for r in self.taken if r is not None)


def _check_lease(record: JobRecord | None, job_id: int, lease: int | None) -> Rejection | None:
    if lease is None:
        return Rejection(
            job_id,
            "FAILED_PRECONDITION",
            f"job {job_id} is not in flight on this stream (acked already, or never delivered here)",
        )
    if record is None:
        return Rejection(job_id, "NOT_FOUND", f"job {job_id} no longer exists")
    if record.status != Status.IN_FLIGHT or record.lease != lease:
        return Rejection(
            job_id,
            "FAILED_PRECONDITION",
            f"job {job_id}'s lease {lease} is no longer current (the job is {record.status.label})",
        )
    return None


class Ack(_Request):
    """Complete jobs in flight on one stream: delete them with every index entry, in one batch."""

    def __init__(self, leases: Sequence[tuple[int, int | None]]) -> None:
        super().__init__()
        self.leases = leases

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        records = view.records([job_id for job_id, _ in self.leases])
        for (job_id, lease), record in zip(self.leases, records, strict=True):
            refusal = _check_lease(record, job_id, lease)
            if refusal is not None:
                outcome.rejected.append(refusal)
                continue
            assert record is not None
            view.delete(record)
            outcome.done.append((job_id, Status.COMPLETED))
        self.result = outcome


class Fail(_Request):
    """Record a failed attempt: an error record, then a retry at the backoff time, or dead."""

    def __init__(
        self,
        failures: Sequence[tuple[Failure, int | None]],
        memory: Memory,
        policy: RetryPolicy,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__()
        self.failures = failures
        self.memory = memory
        self.policy = policy
        self.rng = rng
        self.scheduled: list[JobRecord] = []

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        records = view.records([f.job_id for f, _ in self.failures])
        for (failure, lease), record in zip(self.failures, records, strict=True):
            refusal = _check_lease(record, failure.job_id, lease)
            if refusal is not None:
                outcome.rejected.append(refusal)
                continue
            assert record is not None
            before = indexed(record)
            write_error(view, record, "error", failure.message, failure.error_type, failure.backtrace)
            if failure.kill or self.policy.is_exhausted(record.attempts, record.max_retries):
                record.status = Status.DEAD
            else:
                record.status = Status.SCHEDULED
                record.run_at_ms = view.now_ms + self.policy.delay_ms(record.attempts, self.rng)
                self.scheduled.append(record)
            view.save(record, before)
            outcome.done.append((failure.job_id, record.status))
        self.result = outcome

    def on_commit(self) -> None:
        self.memory.became_scheduled(self.scheduled)


def write_error(
    view: BatchView, record: JobRecord, kind: str, message: str, error_type: str = "", backtrace: str = ""
) -> None:
    entry = {
        "attempt": record.attempts,
        "at_ms": view.now_ms,
        "kind": kind,
        "message": message,
        "error_type": error_type,
        "backtrace": backtrace,
    }
    view.batch.put(Family.DATA, keys.error_key(record.id, record.attempts), json.dumps(entry).encode())
    record.errors += 1


class Requeue(_Request):
    """In flight back to ready: its stream ended (worker lost), or the server restarted."""

    needs_sync = False

    def __init__(
        self, leases: Sequence[tuple[int, int | None]], memory: Memory, *, worker_lost: bool
    ) -> None:
        super().__init__()
        self.leases = leases
        self.memory = memory
        self.worker_lost = worker_lost
        self.requeued: list[JobRecord] = []

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for job_id, _ in self.leases])
        for (_, lease), record in zip(self.leases, records, strict=True):
            if record is None or record.status != Status.IN_FLIGHT:
                continue
            if lease is not None and record.lease != lease:
                continue
            before = indexed(record)
            record.status = Status.READY
            if self.worker_lost:
                record.lost += 1
            view.save(record, before)
            self.requeued.append(record)
        self.result = [r.id for r in self.requeued]

    def on_commit(self) -> None:
        self.memory.became_ready(self.requeued)


class Promote(_Request):
    """Scheduled jobs whose time has come become ready, many in one commit."""

    needs_sync = False

    def __init__(self, due: Sequence[tuple[int, int]], memory: Memory) -> None:
        super().__init__()
        self.due = due
        self.memory = memory
        self.promoted: list[JobRecord] = []

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for _, job_id in self.due])
        for (due_ms, _), record in zip(self.due, records, strict=True):
            if record is None or record.status != Status.SCHEDULED or record.run_at_ms != due_ms:
                continue  # deleted or rescheduled meanwhile
            before = indexed(record)
            record.status = Status.READY
            record.run_at_ms = 0
            view.save(record, before)
            self.promoted.append(record)
        self.result = [r.id for r in self.promoted]

    def on_commit(self) -> None:
        self.memory.became_ready(self.promoted)

    def on_error(self) -> None:
        self.memory.became_scheduled(
            JobRecord(
                id=job_id,
                status=Status.SCHEDULED,
                queue="",
                type="",
                priority=0,
                created_ms=0,
                updated_ms=0,
                run_at_ms=due_ms,
            )
            for due_ms, job_id in self.due
        )
