"""The writes, one class each: read, check, write (in the single writer), then complete (on the loop).

`apply` runs in the writer thread against a BatchView and must refuse (raise) before it writes
anything. `complete` runs where callers wait, after the commit (and its fsync where `needs_sync`):
it updates the in-memory hints, then answers. Memory effects run even when the caller has gone
away: memory must follow the disk.

Every transition out of a state re-reads the record and checks it is still in that state (and,
for jobs in flight, still under the same lease): that check is the compare-and-swap that makes the
in-memory sets mere hints.
"""

import asyncio
import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from pyqueue.engine import recovery
from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Changes, Failure, JobView, NewJob, Outcome, Rejection, UniqueScope
from pyqueue.engine.retry import JobOptions, RetryPolicy
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


class _Transitions(_Request):
    """Collects records by the state they entered, and updates memory accordingly on commit."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory
        self.ready: list[JobRecord] = []
        self.scheduled: list[JobRecord] = []
        self.finished: list[JobRecord] = []

    def on_commit(self) -> None:
        self.memory.became_ready(self.ready)
        self.memory.became_scheduled(self.scheduled)
        self.memory.became_finished(self.finished)

    def finish(self, view: BatchView, record: JobRecord, status: Status, keep_ms: int) -> None:
        """Completed or dead: kept for `keep_ms` (then purged), or deleted now."""
        if status == Status.COMPLETED and keep_ms <= 0:
            view.delete(record)
            return
        before = indexed(record)
        record.status = status
        record.expires_ms = view.now_ms + keep_ms if keep_ms > 0 else 0
        view.save(record, before)
        self.finished.append(record)

    def make_ready(self, view: BatchView, record: JobRecord) -> None:
        before = indexed(record)
        record.status = Status.READY
        record.run_at_ms = record.expires_ms = 0
        view.save(record, before)
        self.ready.append(record)

    def retry_or_die(
        self,
        view: BatchView,
        record: JobRecord,
        policy: RetryPolicy,
        retry_at_ms: int = 0,
        kill: bool = False,
        rng: random.Random | None = None,
    ) -> Status:
        """After a failed attempt (its error already written): scheduled for a retry, or dead."""
        if kill or policy.is_exhausted(record.attempts, record.max_retries):
            self.finish(view, record, Status.DEAD, policy.keep_dead_ms)
            return Status.DEAD
        before = indexed(record)
        record.status = Status.SCHEDULED
        record.expires_ms = 0
        record.run_at_ms = retry_at_ms or view.now_ms + policy.delay_ms(record.attempts, rng)
        view.save(record, before)
        self.scheduled.append(record)
        return Status.SCHEDULED


class Enqueue(_Transitions):
    def __init__(self, jobs: Sequence[NewJob], ids: IdGenerator, memory: Memory) -> None:
        super().__init__(memory)
        self.jobs = jobs
        self.ids = ids

    def apply(self, view: BatchView) -> None:
        now = view.now_ms
        created: list[tuple[int, bool]] = []
        for job in self.jobs:
            if job.unique_key:
                holder = _unique_holder(view, job.unique_key, job.unique_scope)
                if holder is not None:
                    created.append((holder, True))
                    continue
            scheduled = job.run_at_ms > now
            record = JobRecord(
                id=self.ids.next(now),
                status=Status.SCHEDULED if scheduled else Status.READY,
                queue=job.queue,
                type=job.type,
                priority=job.priority,
                created_ms=now,
                updated_ms=now,
                content_type=job.content_type,
                run_at_ms=job.run_at_ms if scheduled else 0,
                max_retries=job.max_retries,
                timeout_ms=job.timeout_ms,
                options=job.options,
                unique_key=job.unique_key,
            )
            view.create(record, job.payload)
            (self.scheduled if scheduled else self.ready).append(record)
            created.append((record.id, False))
        self.result = created


_BLOCKING = {
    UniqueScope.QUEUED: {Status.SCHEDULED, Status.READY},
    UniqueScope.ACTIVE: {Status.SCHEDULED, Status.READY, Status.IN_FLIGHT},
    UniqueScope.EXISTS: set(Status),
}


def _unique_holder(view: BatchView, key: str, scope: int) -> int | None:
    """The job that holds `key` now, if its status blocks a new job in `scope`."""
    holder = view.unique_holder(key)
    if holder is None:
        return None
    (record,) = view.records([holder])
    return holder if record is not None and record.status in _BLOCKING[scope] else None


class Holder(Protocol):
    """What a claimer must provide: the queues it serves and where its leases are recorded."""

    queues: tuple[str, ...]

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
        for record in view.records(self.job_ids):
            if record is None or record.status != Status.READY or record.queue not in self.holder.queues:
                continue  # a stale hint: deleted, moved to another queue, or changed since it was queued
            before = indexed(record)
            record.status = Status.IN_FLIGHT
            record.attempts += 1
            record.lease = (record.lease + 1) & 0xFFFFFFFF
            record.expires_ms = view.now_ms + record.timeout_ms if record.timeout_ms else 0
            view.save(record, before)
            # A snapshot: the writer may change the cached record again while the loop sends this one.
            self.taken.append(record.clone())
        payloads = view.payloads([r.id for r in self.taken])
        self.result = [JobView(r, p) for r, p in zip(self.taken, payloads, strict=True)]

    def on_commit(self) -> None:
        self.holder.delivered(self.taken)
        self.memory.became_in_flight(self.taken)

    def on_error(self) -> None:
        # The keys left memory but the write failed: give them back so another stream can try.
        self.memory.became_ready(self.taken)


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


class Ack(_Transitions):
    """Complete jobs in flight on one stream: delete them with every index entry (or keep them
    completed for their retention), in one batch."""

    def __init__(self, leases: Sequence[tuple[int, int | None]], memory: Memory, policy: RetryPolicy) -> None:
        super().__init__(memory)
        self.leases = leases
        self.policy = policy

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        records = view.records([job_id for job_id, _ in self.leases])
        for (job_id, lease), record in zip(self.leases, records, strict=True):
            refusal = _check_lease(record, job_id, lease)
            if refusal is not None:
                outcome.rejected.append(refusal)
                continue
            assert record is not None
            policy = self.policy.for_job(JobOptions.decode(record.options)) if record.options else self.policy
            self.finish(view, record, Status.COMPLETED, policy.keep_completed_ms)
            outcome.done.append((job_id, Status.COMPLETED))
        self.result = outcome


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


class Fail(_Transitions):
    """Record a failed attempt: an error record, then a retry (at the backoff time or the asked
    time), or dead when killed or out of retries; all in one commit."""

    def __init__(
        self,
        failures: Sequence[tuple[Failure, int | None]],
        memory: Memory,
        policy: RetryPolicy,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(memory)
        self.failures = failures
        self.policy = policy
        self.rng = rng

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        records = view.records([f.job_id for f, _ in self.failures])
        for (failure, lease), record in zip(self.failures, records, strict=True):
            refusal = _check_lease(record, failure.job_id, lease)
            if refusal is not None:
                outcome.rejected.append(refusal)
                continue
            assert record is not None
            write_error(view, record, "error", failure.message, failure.error_type, failure.backtrace)
            policy = self.policy.for_job(JobOptions.decode(record.options))
            status = self.retry_or_die(view, record, policy, failure.retry_at_ms, failure.kill, self.rng)
            outcome.done.append((failure.job_id, status))
        self.result = outcome


class Timeout(_Transitions):
    """Leases that ran out: the attempt fails with a timeout error, then the retry policy applies."""

    needs_sync = False  # lost in a crash, the job is simply in flight again and recovered to ready

    def __init__(self, due: Sequence[tuple[int, int]], memory: Memory, policy: RetryPolicy) -> None:
        super().__init__(memory)
        self.due = due
        self.policy = policy

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for _, job_id in self.due])
        timed_out = []
        for (deadline, _), record in zip(self.due, records, strict=True):
            if record is None or record.status != Status.IN_FLIGHT or record.expires_ms != deadline:
                continue  # acked, failed or extended meanwhile
            write_error(
                view,
                record,
                "timeout",
                f"attempt {record.attempts} ran past its timeout of {record.timeout_ms} ms",
            )
            self.retry_or_die(view, record, self.policy.for_job(JobOptions.decode(record.options)))
            timed_out.append(record.id)
        self.result = timed_out


class Extend(_Request):
    """Move the lease deadline of jobs a worker is still running."""

    needs_sync = False

    def __init__(self, leases: Sequence[tuple[int, int | None]], extend_ms: int, memory: Memory) -> None:
        super().__init__()
        self.leases = leases
        self.extend_ms = extend_ms
        self.memory = memory
        self.extended: list[JobRecord] = []

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for job_id, _ in self.leases])
        for (job_id, lease), record in zip(self.leases, records, strict=True):
            if _check_lease(record, job_id, lease) is not None:
                continue
            assert record is not None
            span = self.extend_ms or record.timeout_ms
            if not span:
                continue
            before = indexed(record)
            record.expires_ms = view.now_ms + span
            view.save(record, before)
            self.extended.append(record.clone())
        self.result = [r.id for r in self.extended]

    def on_commit(self) -> None:
        self.memory.became_in_flight(self.extended)


class Requeue(_Transitions):
    """In flight back to ready: its stream ended (worker lost), or the server restarted. A job
    that has now taken down `max_worker_losses` workers is dead instead of looping forever."""

    needs_sync = False

    def __init__(
        self,
        leases: Sequence[tuple[int, int | None]],
        memory: Memory,
        policy: RetryPolicy,
        *,
        worker_lost: bool,
    ) -> None:
        super().__init__(memory)
        self.leases = leases
        self.policy = policy
        self.worker_lost = worker_lost

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for job_id, _ in self.leases])
        for (_, lease), record in zip(self.leases, records, strict=True):
            if record is None or record.status != Status.IN_FLIGHT:
                continue
            if lease is not None and record.lease != lease:
                continue
            if self.worker_lost:
                record.lost += 1
                if record.lost >= self.policy.max_worker_losses:
                    write_error(
                        view,
                        record,
                        "lost",
                        f"{record.lost} workers were lost while running this job; "
                        "it is dead so that it stops taking workers down",
                    )
                    self.finish(view, record, Status.DEAD, self.policy.keep_dead_ms)
                    continue
            self.make_ready(view, record)
        self.result = [r.id for r in self.ready]


class Promote(_Transitions):
    """Scheduled jobs whose time has come become ready, many in one commit."""

    needs_sync = False

    def __init__(self, due: Sequence[tuple[int, int]], memory: Memory) -> None:
        super().__init__(memory)
        self.due = due

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for _, job_id in self.due])
        for (due_ms, _), record in zip(self.due, records, strict=True):
            if record is None or record.status != Status.SCHEDULED or record.run_at_ms != due_ms:
                continue  # deleted or rescheduled meanwhile
            self.make_ready(view, record)
        self.result = [r.id for r in self.ready]

    def on_error(self) -> None:
        for due_ms, job_id in self.due:
            self.memory.scheduled.insert(due_ms, job_id)


class Purge(_Request):
    """Completed and dead jobs whose retention ran out: deleted with payload and errors."""

    needs_sync = False

    def __init__(self, due: Sequence[tuple[int, int]], memory: Memory) -> None:
        super().__init__()
        self.due = due
        self.memory = memory

    def apply(self, view: BatchView) -> None:
        purged = []
        records = view.records([job_id for _, job_id in self.due])
        for (due_ms, _), record in zip(self.due, records, strict=True):
            if (
                record is None
                or record.status not in (Status.COMPLETED, Status.DEAD)
                or record.expires_ms != due_ms
            ):
                continue
            view.delete(record)
            purged.append(record.id)
        self.result = purged

    def on_error(self) -> None:
        for due_ms, job_id in self.due:
            self.memory.expiring.insert(due_ms, job_id)


class Snapshot(_Request):
    """Open the status-index snapshot the start-up rebuild scans, and zero the counts, in one step
    of the single writer: every count published from here on is a change the snapshot misses."""

    needs_sync = False

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory

    def apply(self, view: BatchView) -> None:
        self.memory.counts.reset(Counter())
        self.result = recovery.status_entries(view.store)


class UpdateJobs(_Transitions):
    """Change jobs that wait. The in-memory sets follow: a moved or re-prioritised job leaves its
    old ready key (a claim that already took it finds the record changed and lets it go) and is
    queued under its new one."""

    def __init__(self, job_ids: Sequence[int], changes: Changes, memory: Memory) -> None:
        super().__init__(memory)
        self.job_ids = job_ids
        self.changes = changes
        self.unready: list[tuple[str, int, int]] = []

    def apply(self, view: BatchView) -> None:
        c = self.changes
        outcome = Outcome(done=[], rejected=[])
        for job_id, record in zip(self.job_ids, view.records(self.job_ids), strict=True):
            if record is None:
                outcome.rejected.append(Rejection(job_id, "NOT_FOUND", f"job {job_id} does not exist"))
                continue
            if record.status not in (Status.SCHEDULED, Status.READY):
                outcome.rejected.append(
                    Rejection(
                        job_id,
                        "FAILED_PRECONDITION",
                        f"job {job_id} is {record.status.label}; only scheduled or ready jobs can be changed",
                    )
                )
                continue
            before = indexed(record)
            if record.status == Status.READY:
                self.unready.append((record.queue, record.priority, job_id))
            if c.queue is not None:
                record.queue = c.queue
            if c.priority is not None:
                record.priority = c.priority
            if c.max_retries is not None:
                record.max_retries = c.max_retries
            if c.options is not None:
                record.options = c.options
            if c.content_type is not None:
                record.content_type = c.content_type
            if c.clear_run_at or (c.run_at_ms is not None and c.run_at_ms <= view.now_ms):
                record.status, record.run_at_ms = Status.READY, 0
            elif c.run_at_ms is not None:
                record.status, record.run_at_ms = Status.SCHEDULED, c.run_at_ms
            view.save(record, before)
            if c.payload is not None:
                view.set_payload(job_id, c.payload)
            (self.ready if record.status == Status.READY else self.scheduled).append(record)
            outcome.done.append((job_id, record.status))
        self.result = outcome

    def on_commit(self) -> None:
        for queue, priority, job_id in self.unready:
            self.memory.ready.remove(queue, priority, job_id)
        super().on_commit()


class DeleteJobs(_Request):
    """Delete jobs in any status. One in flight is not delivered again, and its ack is refused."""

    def __init__(self, job_ids: Sequence[int], memory: Memory) -> None:
        super().__init__()
        self.job_ids = job_ids
        self.memory = memory
        self.unready: list[tuple[str, int, int]] = []

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        for job_id, record in zip(self.job_ids, view.records(self.job_ids), strict=True):
            if record is None:
                outcome.rejected.append(Rejection(job_id, "NOT_FOUND", f"job {job_id} does not exist"))
                continue
            if record.status == Status.READY:
                self.unready.append((record.queue, record.priority, job_id))
            view.delete(record)
            outcome.done.append((job_id, record.status))
        self.result = outcome

    def on_commit(self) -> None:
        # The timer sets keep stale keys; the scheduler, reaper and purger find no record and skip.
        for queue, priority, job_id in self.unready:
            self.memory.ready.remove(queue, priority, job_id)


class PauseQueue(_Request):
    """Pause or resume a queue: persisted, then applied to its lane (and announced on resume)."""

    def __init__(self, queue: str, paused: bool, memory: Memory) -> None:
        super().__init__()
        self.queue = queue
        self.paused = paused
        self.memory = memory

    def apply(self, view: BatchView) -> None:
        key = keys.meta_key(recovery.PAUSED + self.queue)
        if self.paused:
            view.batch.put(Family.DATA, key, b"1")
        else:
            view.batch.delete(Family.DATA, key)

    def on_commit(self) -> None:
        self.memory.ready.set_paused(self.queue, self.paused)
        if not self.paused:
            self.memory.dispatcher.announce([self.queue])
