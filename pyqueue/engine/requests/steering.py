"""Changes made by people: update, retry (dead jobs), cancel, delete, pause and resume."""

from collections.abc import Sequence
from dataclasses import replace

from pyqueue.engine import fair_weights, queue_limits, recovery
from pyqueue.engine.flows import membership
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Changes, Outcome, Rejection
from pyqueue.engine.payloads import payload_problem
from pyqueue.engine.queue_limits import QueueLimit
from pyqueue.engine.requests.base import Request, Transitions
from pyqueue.engine.retry import JobOptions, RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import ENDED, Status

MAX_RETRIES = 2**15 - 1  # the record keeps max_retries in an i16


class UpdateJobs(Transitions):
    """Change jobs that wait. The in-memory sets follow: a moved or re-prioritised job leaves its
    old ready key (a claim that already took it finds the record changed and lets it go) and is
    queued under its new one."""

    def __init__(self, job_ids: Sequence[int], changes: Changes, memory: Memory) -> None:
        super().__init__(memory)
        self.job_ids = job_ids
        self.changes = changes
        self.unready: list[tuple[str, int, int, str]] = []

    def reset(self) -> None:
        super().reset()
        self.unready.clear()

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
            if c.payload is not None or c.content_type is not None:
                content_type = record.content_type if c.content_type is None else c.content_type
                payload = view.payloads([job_id])[0] if c.payload is None else c.payload
                problem = payload_problem(content_type, payload)
                if problem:
                    outcome.rejected.append(Rejection(job_id, "INVALID_ARGUMENT", f"job {job_id}: {problem}"))
                    continue
            before = indexed(record)
            if record.status == Status.READY:
                self.unready.append((record.queue, record.priority, job_id, record.fair_key))
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
        for queue, priority, job_id, fair_key in self.unready:
            self.memory.ready.remove(queue, priority, job_id, fair_key)
        super().on_commit()


class RetryJobs(Transitions):
    """Dead jobs back to ready. Their error history stays (errors are keyed by attempt, so the
    attempts carry on), and they get their retries again: max_retries is raised by what the job
    was allowed, and its count of lost attempts starts over."""

    def __init__(self, job_ids: Sequence[int], memory: Memory, policy: RetryPolicy) -> None:
        super().__init__(memory)
        self.job_ids = job_ids
        self.policy = policy

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        for job_id, record in zip(self.job_ids, view.records(self.job_ids), strict=True):
            if record is None:
                outcome.rejected.append(Rejection(job_id, "NOT_FOUND", f"job {job_id} does not exist"))
                continue
            if record.status != Status.DEAD:
                outcome.rejected.append(
                    Rejection(
                        job_id,
                        "FAILED_PRECONDITION",
                        f"job {job_id} is {record.status.label}, not dead: only dead jobs are retried",
                    )
                )
                continue
            self.handling = record.id
            record.max_retries = min(
                record.attempts + self.policy.retries_for(record.max_retries), MAX_RETRIES
            )
            record.lost = 0
            self.make_ready(view, record)
            membership.job_revived(view, self, record)
            outcome.done.append((job_id, Status.READY))
        self.result = outcome


class CancelJobs(Transitions):
    """Cancel jobs. A waiting one (scheduled or ready) is CANCELLED now. One in flight is marked
    (in its record, so a restart keeps the request) and its stream is told: it ends CANCELLED at
    its next answer, whatever that is. Ended jobs are refused."""

    def __init__(self, job_ids: Sequence[int], memory: Memory, policy: RetryPolicy) -> None:
        super().__init__(memory)
        self.job_ids = job_ids
        self.policy = policy
        self.unready: list[tuple[str, int, int, str]] = []
        self.running: list[tuple[str, int]] = []

    def reset(self) -> None:
        super().reset()
        self.unready.clear()
        self.running.clear()

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        for job_id, record in zip(self.job_ids, view.records(self.job_ids), strict=True):
            if record is None:
                outcome.rejected.append(Rejection(job_id, "NOT_FOUND", f"job {job_id} does not exist"))
                continue
            if record.status in ENDED:
                outcome.rejected.append(
                    Rejection(job_id, "FAILED_PRECONDITION", f"job {job_id} is {record.status.label} already")
                )
                continue
            self.handling = job_id
            if record.status == Status.IN_FLIGHT:
                options = JobOptions.decode(record.options)
                record.options = replace(options, cancelled=True).encode()
                view.save(record, indexed(record))
                self.running.append((record.queue, job_id))
            else:
                if record.status == Status.READY:
                    self.unready.append((record.queue, record.priority, job_id, record.fair_key))
                self.finish(view, record, Status.CANCELLED, self.policy.keep_dead_ms)
            outcome.done.append((job_id, record.status))
        self.result = outcome

    def on_commit(self) -> None:
        super().on_commit()
        for queue, priority, job_id, fair_key in self.unready:
            self.memory.ready.remove(queue, priority, job_id, fair_key)
        if self.running:
            self.memory.on_cancel(self.running)


class DeleteJobs(Transitions):
    """Delete jobs in any status. One in flight is not delivered again, and its ack is refused. A
    job of a batch counts as finished (deleted) there."""

    def __init__(self, job_ids: Sequence[int], memory: Memory) -> None:
        super().__init__(memory)
        self.job_ids = job_ids
        self.unready: list[tuple[str, int, int, str]] = []

    def reset(self) -> None:
        super().reset()
        self.unready.clear()

    def apply(self, view: BatchView) -> None:
        outcome = Outcome(done=[], rejected=[])
        for job_id, record in zip(self.job_ids, view.records(self.job_ids), strict=True):
            if record is None:
                outcome.rejected.append(Rejection(job_id, "NOT_FOUND", f"job {job_id} does not exist"))
                continue
            if record.status == Status.READY:
                self.unready.append((record.queue, record.priority, job_id, record.fair_key))
            self.handling = job_id
            membership.job_deleted(view, self, record)
            view.delete(record)
            outcome.done.append((job_id, record.status))
        self.result = outcome

    def on_commit(self) -> None:
        super().on_commit()  # jobs a batch's callbacks started
        # The timer sets keep stale keys; the scheduler, reaper and purger find no record and skip.
        for queue, priority, job_id, fair_key in self.unready:
            self.memory.ready.remove(queue, priority, job_id, fair_key)
        if self.result is not None and self.result.done:
            self.memory.on_ended([job_id for job_id, _ in self.result.done])


class SetQueueLimit(Request):
    """Set (or clear) a queue's limits: persisted, then applied to its lane."""

    def __init__(self, queue: str, limit: QueueLimit, memory: Memory) -> None:
        super().__init__()
        self.queue = queue
        self.limit = limit
        self.memory = memory

    def apply(self, view: BatchView) -> None:
        view.put_meta(queue_limits.key(self.queue), self.limit.encode() if self.limit.is_set else None)

    def on_commit(self) -> None:
        # Count the queue's jobs in flight now, so a cap set under load holds from the start.
        running = self.memory.counts.total([self.queue], [Status.IN_FLIGHT])
        queue_limits.apply(self.memory.ready, self.queue, self.limit, running)
        self.memory.dispatcher.announce([self.queue])


class SetFairWeights(Request):
    """Replace a queue's fair-share weights: persisted, then applied to its lane."""

    def __init__(self, queue: str, before: dict[str, int], after: dict[str, int], memory: Memory) -> None:
        super().__init__()
        self.queue = queue
        self.before = before
        self.after = after
        self.memory = memory

    def apply(self, view: BatchView) -> None:
        view.put_meta(fair_weights.key(self.queue), fair_weights.encode(self.after) if self.after else None)

    def on_commit(self) -> None:
        fair_weights.apply(self.memory.ready, self.queue, self.before, self.after)


class PauseQueue(Request):
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
