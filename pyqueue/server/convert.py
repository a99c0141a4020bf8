"""Engine values to protobuf messages and back."""

from pyqueue.engine.model import ErrorEntry, JobView, Outcome
from pyqueue.v1 import queue_pb2 as pb


def job_to_pb(view: JobView) -> pb.Job:
    r = view.record
    return pb.Job(
        id=r.id,
        type=r.type,
        queue=r.queue,
        priority=r.priority,
        payload=view.payload,
        content_type=r.content_type,
        status=pb.JobStatus.ValueType(r.status),
        attempts=r.attempts,
        created_at_ms=r.created_ms,
        updated_at_ms=r.updated_ms,
        run_at_ms=r.run_at_ms,
        lease=r.lease,
        max_retries=r.max_retries,
        timeout_ms=r.timeout_ms,
        expires_at_ms=r.expires_ms,
        errors=r.errors,
        lost=r.lost,
    )


def error_to_pb(entry: ErrorEntry) -> pb.JobError:
    return pb.JobError(
        attempt=entry.attempt,
        at_ms=entry.at_ms,
        kind=entry.kind,
        message=entry.message,
        error_type=entry.error_type,
        backtrace=entry.backtrace,
    )


def ack_result(outcome: Outcome) -> pb.TakeResponse:
    return pb.TakeResponse(
        ack_result=pb.AckResult(
            acked=[job_id for job_id, _ in outcome.done],
            rejected=[pb.Rejection(id=r.job_id, code=r.code, message=r.message) for r in outcome.rejected],
        )
    )


def fail_result(outcome: Outcome) -> pb.TakeResponse:
    return pb.TakeResponse(
        fail_result=pb.FailResult(
            failed=[
                pb.FailOutcome(id=job_id, status=pb.JobStatus.ValueType(status))
                for job_id, status in outcome.done
            ],
            rejected=[pb.Rejection(id=r.job_id, code=r.code, message=r.message) for r in outcome.rejected],
        )
    )
