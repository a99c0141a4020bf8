"""What the timed services and the start-up do: time-outs, promotions, purges, the rebuild snapshot."""

from collections import Counter
from collections.abc import Sequence

from pyqueue.engine import rebuild
from pyqueue.engine.memory import Memory
from pyqueue.engine.requests.base import Request, Transitions, write_error
from pyqueue.engine.retry import JobOptions, RetryPolicy
from pyqueue.engine.view import BatchView
from pyqueue.store.records import ENDED, Status


class Timeout(Transitions):
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
            if self.bury(view, record, self.policy.keep_dead_ms):
                continue
            self.handling = record.id
            write_error(
                view,
                record,
                "timeout",
                f"attempt {record.attempts} ran past its timeout of {record.timeout_ms} ms",
            )
            if self.cancelled(view, record, self.policy.keep_dead_ms):
                continue
            self.retry_or_die(view, record, self.policy.for_job(JobOptions.decode(record.options)))
            timed_out.append(record.id)
        self.result = timed_out


class Promote(Transitions):
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


class Purge(Request):
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
            if record is None or record.status not in ENDED or record.expires_ms != due_ms:
                continue
            view.delete(record)
            purged.append(record.id)
        self.result = purged

    def on_error(self) -> None:
        for due_ms, job_id in self.due:
            self.memory.expiring.insert(due_ms, job_id)


class OpenSnapshot(Request):
    """Open the status-index snapshot the start-up rebuild scans, and zero the counts, in one step
    of the single writer: every count published from here on is a change the snapshot misses."""

    needs_sync = False

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory

    def apply(self, view: BatchView) -> None:
        self.memory.counts.reset(Counter())
        self.result = rebuild.snapshot(view.store)
