"""The shape every write shares: read, check, write in the single writer; then complete on the
loop (memory effects, then the answer). See the package docstring."""

import asyncio
import json
import random
from typing import Any

from pyqueue.engine.flows import membership
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import Rejection
from pyqueue.engine.retry import JobOptions, RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import ENDED, IN_FLIGHT, JobRecord, Status

_EVENT = {Status.COMPLETED: "completed", Status.DEAD: "dead", Status.CANCELLED: "cancelled"}


class Request:
    needs_sync = True

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.error: BaseException | None = None
        self.result: Any = None
        # Outbox entries this write put (engine/flows/outbox.py): the last one's sequence, and
        # whom to tell once the write is durable.
        self.outbox_high = 0
        self.outbox_of: Any = None

    def reset(self) -> None:
        """Forget what an abandoned `apply` gathered, before it is applied again."""
        self.result = None
        self.error = None
        self.outbox_high = 0

    def isolate_job(self, message: str, job_id: int | None = None) -> bool:
        """`apply` failed unexpectedly: if one job is to blame (`job_id`, when the failure named
        it), set it aside (the next `apply` buries it) and return True, so the request goes on
        without it. False: the request fails as a whole."""
        return False

    def on_commit(self) -> None:
        """Memory effects of a successful commit."""

    def on_error(self) -> None:
        """Undo what was taken from memory before a failed commit."""

    def complete(self) -> None:
        if self.error is None:
            self.on_commit()
            if self.outbox_high:
                self.outbox_of.durable(self.outbox_high)
        else:
            self.on_error()
        if self.future.cancelled():
            return
        if self.error is None:
            self.future.set_result(self.result)
        else:
            self.future.set_exception(self.error)


class Transitions(Request):
    """Collects records by the state they entered, and updates memory accordingly on commit.

    Each job is handled on its own (`handling` names it), so a job whose handling raises inside
    the writer (a bug, a stored value no check foresaw) is the one to blame: it is buried, dead
    with the error, and the others go on. It cannot crash the server or come back to do it again."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory
        self.ready: list[JobRecord] = []
        self.scheduled: list[JobRecord] = []
        self.finished: list[JobRecord] = []
        self.ended: list[int] = []  # completed or dead (kept or deleted): what WaitJob waits for
        self.handling: int | None = None
        self.blamed: dict[int, str] = {}  # kept across resets: the next apply buries these

    def reset(self) -> None:
        super().reset()
        self.ready.clear()
        self.scheduled.clear()
        self.finished.clear()
        self.ended.clear()
        self.handling = None

    def isolate_job(self, message: str, job_id: int | None = None) -> bool:
        blamed = self.handling if job_id is None else job_id
        if blamed is None or blamed in self.blamed:
            return False  # nothing to blame, or burying it failed too
        self.blamed[blamed] = message
        return True

    def bury(self, view: BatchView, record: JobRecord | None, keep_dead_ms: int) -> Rejection | None:
        """If this job was blamed for a failure inside the writer: dead, with the error."""
        if record is None or record.id not in self.blamed:
            return None
        message = self.blamed[record.id]
        self.handling = record.id
        if record.status not in ENDED:
            write_error(view, record, "internal", message)
            self.finish(view, record, Status.DEAD, keep_dead_ms)
        return Rejection(record.id, "INTERNAL", f"job {record.id} is dead: {message}")

    def on_commit(self) -> None:
        self.memory.became_ready(self.ready)
        self.memory.became_scheduled(self.scheduled)
        self.memory.became_finished(self.finished)
        if self.ended:
            self.memory.on_ended(self.ended)

    def finish(
        self, view: BatchView, record: JobRecord, status: Status, keep_ms: int, result: bytes | None = None
    ) -> None:
        """Completed or dead: kept for `keep_ms` (then purged), or deleted now. A workflow's job
        tells its batch and starts the step after it in the same write (engine/flows)."""
        view.events[_EVENT[status], record.queue] += 1
        if record.options and view.flows is not None:
            membership.job_ended(view, self, record, status, result)
        self.ended.append(record.id)
        if status == Status.COMPLETED and keep_ms <= 0:
            view.delete(record)
            return
        before = indexed(record)
        record.status = status
        record.expires_ms = view.now_ms + keep_ms if keep_ms > 0 else 0
        view.save(record, before)
        self.finished.append(record)

    def cancelled(self, view: BatchView, record: JobRecord, keep_ms: int) -> bool:
        """A job in flight whose cancel was asked for ends CANCELLED at whatever answer comes (an
        ack, a failure, a time-out, its stream's end): it is not completed and never retried."""
        if not record.options or not JobOptions.decode(record.options).cancelled:
            return False
        self.finish(view, record, Status.CANCELLED, keep_ms)
        return True

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
        view.events["failed", record.queue] += 1
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
    if record.status != IN_FLIGHT or record.lease != lease:
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
