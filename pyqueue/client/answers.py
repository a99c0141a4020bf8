"""What the server answers about a job's end, read the same way by both clients: its error
history (`JobError`) and its result (`result_of`)."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyqueue.client.job import Job
from pyqueue.errors import JobFailed, ResourceExhausted
from pyqueue.v1 import queue_pb2 as pb


@dataclass(frozen=True, slots=True)
class JobError:
    """One failed attempt in a job's error history."""

    attempt: int
    at: datetime
    kind: str  # "error", "timeout" or "lost"
    message: str
    error_type: str
    backtrace: str


def error_from_pb(e: pb.JobError) -> "JobError":
    return JobError(
        e.attempt, datetime.fromtimestamp(e.at_ms / 1000, UTC), e.kind, e.message, e.error_type, e.backtrace
    )


def result_of(job: Job, history: Sequence[JobError] = ()) -> Any:
    """A waited-for job's result, or the matching exception (shared by both clients); `history`
    is the job's error history when it is dead."""
    if job.status == "completed":
        if job.result_problem:
            raise ResourceExhausted(f"job {job.id}: {job.result_problem}")
        return json.loads(job._result) if job._result else None
    if job.status == "cancelled":
        raise JobFailed(job.id, "cancelled by request", "Cancelled")
    if job.status == "dead":
        last = history[-1] if history else None
        raise JobFailed(
            job.id, last.message if last else "no error recorded", last.error_type if last else ""
        )
    raise TimeoutError(f"job {job.id} is still {job.status}")
