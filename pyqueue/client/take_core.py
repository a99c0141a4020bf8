"""What both Take streams do alike, written once: answer jobs (ack, fail, extend, release), keep
a future for each ack and failure sent, and read each message from the server (jobs, the answers to acks and failures, cancels, the
server's stop). The streams are two pumps around it: take.py moves messages on a reader thread
with concurrent futures, aio_take.py on the event loop with asyncio futures. Both kinds of future
settle the same way (`set_result`, `set_exception`), so this code does not ask which it holds.
"""

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from pyqueue.client.job import STATUS_NAMES, Job
from pyqueue.client.outbox import Acked
from pyqueue.errors import PyQueueError, Unavailable, from_code_name
from pyqueue.v1 import queue_pb2 as pb


class Settleable(Protocol):
    def done(self) -> bool: ...

    def set_result(self, result: Any, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


A = TypeVar("A", bound=Settleable)  # an ack's future
F = TypeVar("F", bound=Settleable)  # a failure's future


class Answers(Generic[A, F]):
    """The futures of a stream's acks and failures, by job id, until the server answers them.
    Safe from several threads: the sync stream's callers and its reader share it."""

    def __init__(self, new_ack: Callable[[], A], new_fail: Callable[[], F]) -> None:
        self._new_ack, self._new_fail = new_ack, new_fail
        self._acks: dict[int, A] = {}
        self._fails: dict[int, F] = {}
        self._lock = threading.Lock()

    def ack(self, job_id: int) -> tuple[A, bool]:
        """The future of the job's ack, and whether it is new (False: answered already, the same
        answer comes back, and nothing is to be sent again)."""
        with self._lock:
            if job_id in self._acks:
                return self._acks[job_id], False
            future = self._acks[job_id] = self._new_ack()
            return future, True

    def fail(self, job_id: int) -> tuple[F, bool]:
        with self._lock:
            if job_id in self._fails:
                return self._fails[job_id], False
            future = self._fails[job_id] = self._new_fail()
            return future, True

    def acked(self, answer: pb.AckResult) -> None:
        with self._lock:
            done = [self._acks.pop(job_id, None) for job_id in answer.acked]
            refused = [(r, self._acks.pop(r.id, None)) for r in answer.rejected]
        for future in done:
            _settle(future, None)
        _refuse(refused)

    def failed(self, answer: pb.FailResult) -> None:
        with self._lock:
            done = [(o.status, self._fails.pop(o.id, None)) for o in answer.failed]
            refused = [(r, self._fails.pop(r.id, None)) for r in answer.rejected]
        for status, future in done:
            _settle(future, STATUS_NAMES.get(status, "unknown"))
        _refuse(refused)

    def end(self, failure: BaseException) -> None:
        """The stream ended: every answer still awaited fails with `failure`."""
        with self._lock:
            pending: list[Settleable] = [*self._acks.values(), *self._fails.values()]
            self._acks.clear()
            self._fails.clear()
        for future in pending:
            if not future.done():
                future.set_exception(failure)


class Answering(Generic[A, F]):
    """How a worker answers the jobs of a stream, written once for both: each answer is checked
    against the stream's state, registered (an ack or failure sent twice is the same answer) and
    handed to the pump's outbox (`_send`)."""

    answers_async = False  # the futures are asyncio ones (see job.Settles)
    _answers: "Answers[A, F]"
    _error: PyQueueError | None
    _closed: bool

    def _send(self, item: Any) -> None:
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise Unavailable("the take stream is closed")

    def ack(self, job: Job, result: bytes | None = None) -> A:
        """Complete the job; `result` is its return value as JSON (kept if the job asked for it)."""
        self._check_open()
        future, new = self._answers.ack(job.id)
        if new:  # else answered already: the same answer
            self._send(Acked(job.id, job.lease, result))
        return future

    def fail(
        self,
        job: Job,
        message: str,
        *,
        kill: bool = False,
        error_type: str = "",
        backtrace: str = "",
        retry_at_ms: int = 0,
    ) -> F:
        """Report a failed attempt (see Job.fail); the future resolves to the job's new status."""
        self._check_open()
        future, new = self._answers.fail(job.id)
        if new:
            self._send(
                pb.Failure(
                    id=job.id,
                    lease=job.lease,
                    message=message,
                    error_type=error_type,
                    backtrace=backtrace,
                    kill=kill,
                    retry_at_ms=retry_at_ms,
                )
            )
        return future

    def extend(self, jobs: list[Job], extend_ms: int = 0) -> None:
        """Move the lease deadline of jobs still being worked on (0: by each job's own timeout),
        never past each attempt's start plus its timeout."""
        self._check_open()
        self._send(pb.Extend(ids=[j.id for j in jobs], leases=[j.lease for j in jobs], extend_ms=extend_ms))

    def release(self, job: Job, delay_ms: int = 0, *, unknown_type: bool = False) -> None:
        """Hand back a job not started: no attempt counts; it is ready again (after `delay_ms`).
        `unknown_type`: this worker has no function for it (the server counts those, and makes
        the job dead past its --max-unknown-handbacks)."""
        self._check_open()
        self._send(pb.Release(ids=[job.id], leases=[job.lease], delay_ms=delay_ms, unknown_type=unknown_type))


class Reading(Protocol):
    """What a pump does with what the server sends, besides settling answers."""

    def _on_jobs(self, jobs: Iterable[pb.Job]) -> None: ...

    def _on_cancel(self, job_ids: list[int]) -> None: ...

    def _on_stopping(self) -> None: ...


def read(response: pb.TakeResponse, answers: Answers[Any, Any], reading: Reading) -> None:
    """One message from the server, in the order it lived it: answers before the jobs they
    freed room for."""
    kind = response.WhichOneof("kind")
    if kind == "jobs":
        if response.jobs.HasField("ack_result"):  # answers that came with the jobs
            answers.acked(response.jobs.ack_result)
        reading._on_jobs(response.jobs.jobs)
    elif kind == "ack_result":
        answers.acked(response.ack_result)
    elif kind == "fail_result":
        answers.failed(response.fail_result)
    elif kind == "cancel":
        reading._on_cancel(list(response.cancel.ids))
    elif kind == "stopping":
        reading._on_stopping()


def _settle(future: Settleable | None, value: Any) -> None:
    if future is not None and not future.done():
        future.set_result(value)


def _refuse(refused: Sequence[tuple[pb.Rejection, Settleable | None]]) -> None:
    for rejection, future in refused:
        if future is not None and not future.done():
            future.set_exception(from_code_name(rejection.code, rejection.message))
