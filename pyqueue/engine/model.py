"""Values that cross the engine's boundary: what callers hand in and what they get back."""

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyqueue.store.records import JobRecord, Status

Clock = Callable[[], int]
"""Milliseconds since the epoch; injectable so tests can drive time."""

_WALL_AT_START_MS = time.time_ns() // 1_000_000
_MONOTONIC_AT_START_MS = time.monotonic_ns() // 1_000_000


def system_clock() -> int:
    """The server's time: the wall clock when the process started, moved on by the monotonic
    clock. A step of the system clock while it runs (NTP, an operator, a VM resumed) moves no
    deadline, lease or retry already computed, and does not make time stand still or jump; the
    server takes up the stepped wall clock at its next start. Clients' `run_at` times are compared
    with this clock."""
    return _WALL_AT_START_MS + time.monotonic_ns() // 1_000_000 - _MONOTONIC_AT_START_MS


# NewJob and JobView are made once per job on every enqueue and claim. They are not frozen, because
# a frozen dataclass's __init__ sets each field through object.__setattr__ (3.3 us for a NewJob,
# 0.9 us without); nothing changes one after it is made, and they hash by their fields as before.
@dataclass(slots=True, unsafe_hash=True)
class NewJob:
    type: str
    queue: str
    priority: int
    payload: bytes
    content_type: str = ""
    run_at_ms: int = 0  # absolute; 0 or past: ready at once
    max_retries: int = -1  # -1: the server's default
    timeout_ms: int = 0
    options: bytes = b""  # JobOptions, encoded
    unique_key: str = ""
    unique_scope: int = 0  # UniqueScope
    limit_key: str = ""  # counts under this key against its queue's per-key cap
    fold_key: str = ""  # joins the waiting job of its queue with this key (engine/requests/producers.py)
    fold_max: int = 0  # payloads one folded job collects
    fair_key: str = ""  # within its priority, waits for this key's turn (fair share)
    completed_result: bytes | None = None  # a record of a job run elsewhere: stored completed


def new_record(job: NewJob, job_id: int, now: int, run_at_ms: int, options: bytes) -> JobRecord:
    """A new job's record: scheduled when `run_at_ms` is to come, else ready."""
    scheduled = run_at_ms > now
    return JobRecord(
        id=job_id,
        status=Status.SCHEDULED if scheduled else Status.READY,
        queue=job.queue,
        type=job.type,
        priority=job.priority,
        created_ms=now,
        updated_ms=now,
        content_type=job.content_type,
        run_at_ms=run_at_ms if scheduled else 0,
        max_retries=job.max_retries,
        timeout_ms=job.timeout_ms,
        options=options,
        unique_key=job.unique_key,
        limit_key=job.limit_key,
        fair_key=job.fair_key,
    )


_IN_QUEUE = "\x1f"  # a unit separator: never in a (printable) unique key, nor in a queue name


def scoped_unique_key(queue: str, key: str) -> str:
    """The stored form of a unique key that holds within one queue only."""
    return f"{queue}{_IN_QUEUE}{key}"


def shown_unique_key(stored: str) -> tuple[str, bool]:
    """(the key as the producer gave it, whether it holds within its queue only)."""
    _, scoped, key = stored.rpartition(_IN_QUEUE)
    return key, bool(scoped)


class UniqueScope:
    """While a job holds its unique key: which of its statuses block a second job with the key."""

    QUEUED = 0
    ACTIVE = 1
    EXISTS = 2


@dataclass(frozen=True, slots=True)
class Changes:
    """What UpdateJobs changes; None leaves a field as it is."""

    queue: str | None = None
    priority: int | None = None
    run_at_ms: int | None = None  # a time; with clear_run_at, the job becomes ready
    clear_run_at: bool = False
    max_retries: int | None = None
    options: bytes | None = None  # JobOptions, encoded, replacing the old ones
    payload: bytes | None = None
    content_type: str | None = None


# What is stored in place of a result too large to keep: not JSON (a result is), so never taken
# for one; the text after it says why.
RESULT_NOT_KEPT = b"\x00not kept\x00"


@dataclass(slots=True, unsafe_hash=True)
class JobView:
    """A job as stored: its record and its payload."""

    record: JobRecord
    payload: bytes
    result: bytes | None = None  # completed jobs that keep their result
    damage: str = ""  # the record could not be read: only `record.id` is known (a listing's marker)

    @classmethod
    def damaged(cls, job_id: int, problem: str) -> "JobView":
        return cls(JobRecord(job_id, Status.SCHEDULED, "", "", 0, 0, 0), b"", damage=problem)


@dataclass(frozen=True, slots=True)
class Rejection:
    job_id: int
    code: str  # a gRPC status name, e.g. FAILED_PRECONDITION
    message: str


@dataclass(frozen=True, slots=True)
class Failure:
    job_id: int
    message: str
    error_type: str = ""
    backtrace: str = ""
    kill: bool = False
    retry_at_ms: int = 0


@dataclass(frozen=True, slots=True)
class ErrorEntry:
    attempt: int
    at_ms: int
    kind: str  # error | timeout | lost | interrupted | internal (the server failed handling the job)
    message: str
    error_type: str = ""
    backtrace: str = ""

    @classmethod
    def from_json(cls, raw: bytes) -> "ErrorEntry":
        """An entry as stored; fields it does not know (an unknown-type hand-back's count) are
        the writer's own."""
        fields = json.loads(raw)
        return cls(**{name: fields[name] for name in cls.__dataclass_fields__ if name in fields})


@dataclass(slots=True)
class Outcome:
    """What became of a batch of acks or failures: per job, done or refused."""

    done: list[tuple[int, int]]  # (job id, status after)
    rejected: list[Rejection]
    finished: list[int] = field(default_factory=list)  # attempts the answer ended (done or not)
    # Ids refused because the stream does not hold them, all for the one reason NOT_HELD: kept as
    # ids, not Rejections, so that a flood of them costs no Python object per id.
    stray: list[int] = field(default_factory=list)


# Short, as it is sent once per id: answered already, timed out, or never delivered here.
NOT_HELD = ("FAILED_PRECONDITION", "not in flight on this stream")


class Ending(enum.IntEnum):
    """How an attempt that was in flight ended without an ack or a fail."""

    RELEASED = 1  # never started (prefetched, or handed back): the attempt is taken back
    INTERRUPTED = 2  # started, then stopped on purpose (a clean close, a deploy): counts, never lost
    LOST = 3  # started, then the worker vanished (broken stream, keepalive): counts toward the cap
    RECOVERED = 4  # in flight when the server died: lost if its record says it had started, else released
    UNKNOWN_TYPE = 5  # handed back by a worker without a function for its type: released, and counted
