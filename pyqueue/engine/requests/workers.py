"""What a Take stream's worker causes: claim, ack, fail, and moving a lease deadline (start, extend)."""

import json
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from pyqueue import failpoints
from pyqueue.engine.flows import membership
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import RESULT_NOT_KEPT, Failure, JobView, Outcome
from pyqueue.engine.requests.base import Request, Transitions, check_lease, write_error
from pyqueue.engine.retry import JobOptions, RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import IN_FLIGHT, READY, JobRecord, Status

log = logging.getLogger("pyqueue.engine")
T = TypeVar("T")


class Holder(Protocol):
    """What a claimer must provide: the queues it serves and where its leases are recorded."""

    queues: tuple[str, ...]
    reports_starts: bool  # then the time limit runs from the start, not from the delivery

    def delivered(self, jobs: Sequence[JobView]) -> None: ...


class Claim(Request):
    """Mark ready jobs in flight for one stream. The ids were already removed from the ready set:
    that removal was the claim; this is the compare-and-swap that confirms it on disk.

    At most `budget_bytes` of payload is taken (always at least one job): the rest goes back to the
    ready set untouched, so a stream's buffers stay bounded whatever its prefetch."""

    needs_sync = False

    def __init__(
        self, job_ids: Sequence[int], holder: Holder, memory: Memory, budget_bytes: int = 1 << 62
    ) -> None:
        super().__init__()
        self.job_ids = job_ids
        self.holder = holder
        self.memory = memory
        self.budget_bytes = budget_bytes
        self.taken: list[JobRecord] = []
        self.untaken: list[JobRecord] = []

    def reset(self) -> None:
        super().reset()
        self.taken.clear()
        self.untaken.clear()

    def apply(self, view: BatchView) -> None:
        queues = self.holder.queues
        valid = [
            r
            for r in _readable(view.records, self.job_ids)
            # Not valid: a stale hint (deleted, moved to another queue, or changed since it was queued).
            if r is not None and r.status == READY and r.queue in queues
        ]
        payloads = _readable(view.payloads, [r.id for r in valid])
        now = view.now_ms
        starts_now = not self.holder.reports_starts  # else the worker says when it begins
        waits = view.waits
        taken, untaken, save = self.taken, self.untaken, view.save
        used = 0
        chosen: list[bytes] = []
        for record, payload in zip(valid, payloads, strict=True):
            if payload is None:
                continue  # unreadable: set aside (logged), never offered again until repaired
            if untaken or (chosen and used + len(payload) > self.budget_bytes):
                untaken.append(record)  # and every one after it: the order holds
                continue
            used += len(payload)
            chosen.append(payload)
            queue_waits = waits.get(record.queue)
            if queue_waits is None:
                queue_waits = waits[record.queue] = []
            queue_waits.append((now - record.updated_ms) / 1000)
            before = indexed(record)
            record.status = IN_FLIGHT
            record.attempts += 1
            record.lease = (record.lease + 1) & 0xFFFFFFFF
            record.started_ms = now if starts_now else 0
            record.expires_ms = now + record.timeout_ms if starts_now and record.timeout_ms else 0
            save(record, before)
            # A snapshot: the writer may change the cached record again while the loop sends this one.
            taken.append(record.clone())
        self.result = [JobView(r, p) for r, p in zip(taken, chosen, strict=True)]

    def on_commit(self) -> None:
        self.holder.delivered(self.result)
        self.memory.became_in_flight(self.taken)
        self.memory.became_ready(self.untaken)

    def on_error(self) -> None:
        # The keys left memory but the write failed: give them back so another stream can try.
        self.memory.became_ready(self.taken + self.untaken)


def _readable(read: Callable[[list[int]], Sequence[T]], job_ids: Sequence[int]) -> list[T | None]:
    """`read(job_ids)`, or, if that fails (a damaged block), each job read alone: what cannot be
    read is None and logged, so one damaged block costs its own jobs, not the whole claim."""
    try:
        return list(read(list(job_ids)))
    except Exception:
        pass
    out: list[T | None] = []
    for job_id in job_ids:
        try:
            out.append(read([job_id])[0])
        except Exception as exc:
            log.error("job %d cannot be read (%s); it is left out until `pyqueue repair`", job_id, exc)
            out.append(None)
    return out


class Ack(Transitions):
    """Complete jobs in flight on one stream: delete them with every index entry (or keep them
    completed for their retention), in one batch."""

    def __init__(
        self,
        leases: Sequence[tuple[int, int]],
        memory: Memory,
        policy: RetryPolicy,
        results: Mapping[int, bytes] | None = None,
    ) -> None:
        super().__init__(memory)
        self.leases = leases
        self.policy = policy
        self.results = results or {}

    def apply(self, view: BatchView) -> None:
        failpoints.fail("ack")
        outcome = Outcome(done=[], rejected=[])
        records = view.records([job_id for job_id, _ in self.leases])
        for (job_id, lease), record in zip(self.leases, records, strict=True):
            refusal = check_lease(record, job_id, lease) or self.bury(view, record, self.policy.keep_dead_ms)
            if refusal is not None:
                outcome.rejected.append(refusal)
                continue
            assert record is not None
            self.handling = job_id
            failpoints.fail("ack_job", str(job_id))
            failpoints.crash("crash_at_ack", str(job_id))
            if self.cancelled(view, record, self.policy.keep_dead_ms):
                outcome.done.append((job_id, Status.CANCELLED))
                continue
            policy = self.policy
            result = self.results.get(job_id)
            if record.options:
                options = JobOptions.decode(record.options)
                policy = policy.for_job(options)
                if options.flow and self._too_large_to_hand_on(view, record, result, policy):
                    outcome.done.append((job_id, record.status))
                    continue
                if options.keep_result_ms is not None and result is not None:
                    view.batch.put(Family.DATA, keys.result_key(job_id), result)
            self.finish(view, record, Status.COMPLETED, policy.keep_completed_ms, result)
            outcome.done.append((job_id, Status.COMPLETED))
        self.result = outcome

    def _too_large_to_hand_on(
        self, view: BatchView, record: JobRecord, result: bytes | None, policy: RetryPolicy
    ) -> bool:
        """A workflow step's result goes to the next step: one too large fails the attempt."""
        flows = view.flows
        if flows is None or result is None or not membership.passes_result(record):
            return False
        if result.startswith(RESULT_NOT_KEPT) or len(result) > flows.max_input_bytes:
            problem = (
                f"the result is over the {flows.max_input_bytes} bytes a workflow hands on to its next "
                "step (--max-payload-bytes): return less (a key to where the data is, say)"
            )
        else:
            try:
                json.loads(result)
                return False
            except ValueError:
                problem = "the result is not JSON, and a workflow hands results on as JSON"
        write_error(view, record, "error", problem, "ResultNotHandedOn")
        self.retry_or_die(view, record, policy)
        return True


class Fail(Transitions):
    """Record a failed attempt: an error record, then a retry (at the backoff time or the asked
    time), or dead when killed or out of retries; all in one commit."""

    def __init__(
        self,
        failures: Sequence[tuple[Failure, int]],
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
            refusal = check_lease(record, failure.job_id, lease) or self.bury(
                view, record, self.policy.keep_dead_ms
            )
            if refusal is not None:
                outcome.rejected.append(refusal)
                continue
            assert record is not None
            self.handling = failure.job_id
            write_error(view, record, "error", failure.message, failure.error_type, failure.backtrace)
            if self.cancelled(view, record, self.policy.keep_dead_ms):
                outcome.done.append((failure.job_id, Status.CANCELLED))
                continue
            policy = self.policy.for_job(JobOptions.decode(record.options))
            status = self.retry_or_die(view, record, policy, failure.retry_at_ms, failure.kill, self.rng)
            outcome.done.append((failure.job_id, status))
        self.result = outcome


class SetDeadlines(Request):
    """Mark attempts in flight started and move their lease deadlines: at a start (the time limit
    runs from there) or an extension. The caller has already capped each deadline at the attempt's
    start plus its timeout; a deadline of 0 moves nothing.

    The start is written (without a sync) so that a restart can tell the attempts that were running
    when the server died (they count toward the poison cap) from those only prefetched."""

    needs_sync = False

    def __init__(
        self, deadlines: Sequence[tuple[int, int, int]], memory: Memory, started_ms: int = 0
    ) -> None:
        super().__init__()
        self.deadlines = deadlines
        self.memory = memory
        self.started_ms = started_ms
        self.moved: list[JobRecord] = []

    def reset(self) -> None:
        super().reset()
        self.moved.clear()

    def apply(self, view: BatchView) -> None:
        records = view.records([job_id for job_id, _, _ in self.deadlines])
        for (job_id, lease, deadline), record in zip(self.deadlines, records, strict=True):
            if check_lease(record, job_id, lease) is not None:
                continue
            assert record is not None
            starts = self.started_ms and not record.started_ms
            moves = deadline and record.expires_ms != deadline
            if not (starts or moves):
                continue
            before = indexed(record)
            if starts:
                record.started_ms = self.started_ms
            if moves:
                record.expires_ms = deadline
            view.save(record, before)
            if moves:
                self.moved.append(record.clone())
        self.result = [r.id for r in self.moved]

    def on_commit(self) -> None:
        self.memory.became_in_flight(self.moved)
