"""The shape every write shares: read, check, write in the single writer; then complete on the
loop (memory effects, then the answer). See the package docstring."""

import asyncio
import json
import random
from typing import Any

from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Rejection
from pyqueue.engine.retry import RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import JobRecord, Status


class Request:
    needs_sync = True

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.error: BaseException | None = None
        self.result: Any = None

    def reset(self) -> None:
        """Forget what an abandoned `apply` gathered, before it is applied again."""
        self.result = None
        self.error = None

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


class Transitions(Request):
    """Collects records by the state they entered, and updates memory accordingly on commit."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory
        self.ready: list[JobRecord] = []
        self.scheduled: list[JobRecord] = []
        self.finished: list[JobRecord] = []

    def reset(self) -> None:
        super().reset()
        self.ready.clear()
        self.scheduled.clear()
        self.finished.clear()

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


def check_lease(record: JobRecord | None, job_id: int, lease: int | None) -> Rejection | None:
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
