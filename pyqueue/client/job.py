"""`Job`: what the client shows of a job, and how a worker finishes one it took."""

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pyqueue.client import codec
from pyqueue.errors import ResourceExhausted
from pyqueue.v1 import queue_pb2 as pb


class Settles(Protocol):
    """How a taken job is answered: what both Take streams offer their jobs (client/take_core.py's
    Answering). Job holds its stream as this, so job.py imports no stream and no client. The
    futures are concurrent ones from a sync stream, asyncio ones from an async stream
    (`answers_async`)."""

    answers_async: bool

    def ack(self, job: "Job", result: bytes | None = None) -> Any: ...

    def fail(
        self,
        job: "Job",
        message: str,
        *,
        kill: bool = False,
        error_type: str = "",
        backtrace: str = "",
        retry_at_ms: int = 0,
    ) -> Any: ...

    def extend(self, jobs: list["Job"], extend_ms: int = 0) -> None: ...

    def release(self, job: "Job", delay_ms: int = 0, *, unknown_type: bool = False) -> None: ...


class WaitsForResults(Protocol):
    """How a job waits for its result: what Client offers the jobs it enqueued."""

    def result(self, job_id: int, timeout: float | None = None) -> Any: ...


STATUS_NAMES: dict[int, str] = {
    pb.JOB_STATUS_SCHEDULED: "scheduled",
    pb.JOB_STATUS_READY: "ready",
    pb.JOB_STATUS_IN_FLIGHT: "in_flight",
    pb.JOB_STATUS_COMPLETED: "completed",
    pb.JOB_STATUS_DEAD: "dead",
    pb.JOB_STATUS_CANCELLED: "cancelled",
}


def _time(ms: int) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


@dataclass(slots=True)
class Job:
    """A job: id, type, queue, priority (0 runs first), payload, status and timestamps."""

    id: int
    type: str
    queue: str
    priority: int
    payload: Any
    content_type: str
    status: str
    attempts: int
    created_at: datetime | None
    updated_at: datetime | None
    run_at: datetime | None
    lease: int = 0
    max_retries: int = -1
    timeout_ms: int = 0
    expires_at: datetime | None = None
    errors: int = 0
    lost: int = 0
    started_at: datetime | None = None  # in flight: when its worker began this attempt
    unique_key: str = ""
    unique_in_queue: bool = False  # the unique key holds within its queue only
    duplicate: bool = False  # from enqueue: a unique job that already existed
    headers: dict[str, str] = field(default_factory=dict)  # what the producer handed over
    wants_result: bool = False  # enqueued with keep_result: the worker sends the return value
    limit_key: str = ""  # its queue's per-key cap counts it under this key
    fair_key: str = ""  # within its priority it waits for this key's turn
    # The payload's bytes do not decode as its content type says (a record from before the server
    # checked them): `payload` holds the raw bytes, and a worker fails the attempt with this.
    payload_error: str = ""
    # A listing reached a stored record that cannot be read: only the id is known, this says why.
    damage: str = ""
    result_problem: str = ""  # completed, but its result was not kept: why (result() raises it)
    workflow_id: int = 0  # a workflow's job: its workflow (docs/workflows.md)
    batch_id: int = 0  # and its batch, when it is a member of one
    input: Any = None  # what the step before handed it (when has_input)
    has_input: bool = False
    folded: bool = False  # its payload is the list of payloads folded into it (fold_key)
    _result: bytes = field(default=b"", repr=False, compare=False)  # completed: the result, JSON
    _client: WaitsForResults | None = field(default=None, repr=False, compare=False)
    _stream: Settles | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, message: pb.Job, stream: Settles | None = None) -> "Job":
        try:
            payload, payload_error = codec.decode(message.payload, message.content_type), ""
        except (ValueError, RecursionError) as exc:  # one bad job must not stop a listing or a worker
            payload = message.payload
            payload_error = f"the payload does not decode as {message.content_type} ({exc})"
        return cls(
            id=message.id,
            type=message.type,
            queue=message.queue,
            priority=message.priority,
            payload=payload,
            payload_error=payload_error,
            damage=message.damage,
            result_problem=message.result_problem,
            content_type=message.content_type,
            status=STATUS_NAMES.get(message.status, "unknown"),
            attempts=message.attempts,
            created_at=_time(message.created_at_ms),
            updated_at=_time(message.updated_at_ms),
            run_at=_time(message.run_at_ms),
            lease=message.lease,
            max_retries=message.max_retries,
            timeout_ms=message.timeout_ms,
            expires_at=_time(message.expires_at_ms),
            errors=message.errors,
            lost=message.lost,
            started_at=_time(message.started_at_ms),
            unique_key=message.unique_key,
            unique_in_queue=message.unique_in_queue,
            headers=dict(message.headers) if message.headers else {},
            wants_result=message.wants_result,
            limit_key=message.limit_key,
            fair_key=message.fair_key,
            workflow_id=message.workflow_id,
            batch_id=message.batch_id,
            input=json.loads(message.input) if message.has_input else None,
            has_input=message.has_input,
            folded=message.folded,
            _result=message.result,
            _stream=stream,
        )

    def result(self, timeout: float | None = None) -> Any:
        """The handler's return value, once the job completed: waits up to `timeout` seconds (None:
        as long as it takes), woken by the server when the job ends, without polling. The job
        must have been enqueued with `keep_result`. Raises JobFailed if the job is dead, and
        TimeoutError if it has not ended in time. For a job of an AsyncClient, use
        `await client.result(job.id)`."""
        if self.status == "completed" and self.result_problem:
            raise ResourceExhausted(f"job {self.id}: {self.result_problem}")
        if self.status == "completed" and self._result:
            return json.loads(self._result)
        if self._client is None:
            raise RuntimeError("this job has no Client to wait with: use client.result(job.id)")
        return self._client.result(self.id, timeout)

    def _taken(self) -> Settles:
        if self._stream is None:
            raise RuntimeError("only a job received from Client.take() can be acked or failed")
        return self._stream

    def _blocking(self, wait: bool) -> Settles:
        stream = self._taken()
        if wait and stream.answers_async:  # checked before anything is sent
            raise RuntimeError(
                "this job came from an AsyncClient's stream: `await job.ack_async()` / "
                "`await job.fail_async(...)` (or pass wait=False)"
            )
        return stream

    def ack(self, result: Any = None, *, wait: bool = True) -> None:
        """Mark the job completed; `result` (JSON-serialisable) is kept if the job asked for it
        (keep_result). With wait (the default), return once the server has committed it."""
        raw = json.dumps(result).encode() if self.wants_result else None
        future = self._blocking(wait).ack(self, raw)
        if wait:
            future.result()

    async def ack_async(self, result: Any = None) -> None:
        """`ack`, awaited: returns once the server has committed it, whichever client took it."""
        raw = json.dumps(result).encode() if self.wants_result else None
        stream = self._taken()
        await _awaited(stream, stream.ack(self, raw))

    async def fail_async(
        self,
        message: str,
        *,
        kill: bool = False,
        error_type: str = "",
        backtrace: str = "",
        retry_at: datetime | None = None,
    ) -> str:
        """`fail`, awaited: the job's new status, whichever client took it."""
        stream = self._taken()
        future = self._send_fail(stream, message, kill, error_type, backtrace, retry_at)
        return str(await _awaited(stream, future))

    def fail(
        self,
        message: str,
        *,
        kill: bool = False,
        error_type: str = "",
        backtrace: str = "",
        retry_at: datetime | None = None,
        wait: bool = True,
    ) -> str | None:
        """Report a failed attempt; `kill` makes the job dead at once, `retry_at` overrides the
        backoff. Returns the job's new status ("scheduled" for a retry, or "dead")."""
        future = self._send_fail(self._blocking(wait), message, kill, error_type, backtrace, retry_at)
        return future.result() if wait else None

    def _send_fail(
        self,
        stream: Settles,
        message: str,
        kill: bool,
        error_type: str,
        backtrace: str,
        retry_at: datetime | None,
    ) -> Any:
        retry_at_ms = int(retry_at.timestamp() * 1000) if retry_at else 0
        return stream.fail(
            self, message, kill=kill, error_type=error_type, backtrace=backtrace, retry_at_ms=retry_at_ms
        )

    def extend(self, seconds: float = 0) -> None:
        """Keep the lease while still working: the deadline moves to now + `seconds` (0: the job's
        timeout), but never past the attempt's start plus the job's timeout."""
        self._taken().extend([self], int(seconds * 1000))

    def release(self, *, delay: float = 0) -> None:
        """Hand the job back without running it: no attempt counts; ready again after `delay` s."""
        self._taken().release(self, int(delay * 1000))

    def to_dict(self) -> dict[str, Any]:
        """The job as JSON-ready values. The id is a string: ids pass 2**53, where JSON numbers
        lose digits in JavaScript and other readers."""
        payload = self.payload if not isinstance(self.payload, bytes) else self.payload.hex()
        return (
            {
                "id": str(self.id),
                "type": self.type,
                "queue": self.queue,
                "priority": self.priority,
                "payload": payload,
                "content_type": self.content_type,
                "status": self.status,
                "attempts": self.attempts,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "updated_at": self.updated_at.isoformat() if self.updated_at else None,
                "run_at": self.run_at.isoformat() if self.run_at else None,
                "max_retries": self.max_retries,
                "timeout_ms": self.timeout_ms,
                "expires_at": self.expires_at.isoformat() if self.expires_at else None,
                "errors": self.errors,
                "lost": self.lost,
                "started_at": self.started_at.isoformat() if self.started_at else None,
            }
            | ({"payload_error": self.payload_error} if self.payload_error else {})
            | ({"damage": self.damage} if self.damage else {})
        )


async def _awaited(stream: Settles, future: Any) -> Any:
    return await (future if stream.answers_async else asyncio.wrap_future(future))
