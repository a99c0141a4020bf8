"""Engine values to protobuf messages and back."""

from collections.abc import Callable, Iterable

import grpc

from pyqueue._native import encode_push, encode_refusals
from pyqueue.engine import Engine, Status
from pyqueue.engine.cron_entry import CronEntry
from pyqueue.engine.errors import InvalidArgument
from pyqueue.engine.fair_weights import KeyWaiting
from pyqueue.engine.model import (
    NOT_HELD,
    RESULT_NOT_KEPT,
    Changes,
    ErrorEntry,
    JobView,
    NewJob,
    Outcome,
    shown_unique_key,
)
from pyqueue.engine.query import Bounds, JobFilter
from pyqueue.engine.queue_limits import QueueLimit
from pyqueue.engine.retry import JobOptions
from pyqueue.v1 import queue_pb2 as pb


def job_to_pb(view: JobView, make: Callable[..., pb.Job] = pb.Job) -> pb.Job:
    """The job as a message made by `make`: pb.Job, or a repeated field's `add`, which builds it in
    place (a message built apart is copied in: 5 us a job on a push, against 3 in place)."""
    r = view.record
    if view.damage:
        return make(id=r.id, damage=view.damage)
    message = make(
        id=r.id,
        type=r.type,
        queue=r.queue,
        priority=r.priority,
        payload=view.payload,
        content_type=r.content_type,
        status=int(r.status),
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
        started_at_ms=r.started_ms if r.status == Status.IN_FLIGHT else 0,
        limit_key=r.limit_key,
        fair_key=r.fair_key,
    )
    if r.unique_key:
        message.unique_key, message.unique_in_queue = shown_unique_key(r.unique_key)
    if r.options:  # rare: only jobs with options (backoff, retention, headers, results) have any
        options = JobOptions.decode(r.options)
        if options.headers:
            message.headers.update(options.headers)
        message.wants_result = options.keep_result_ms is not None
        if options.flow:
            _flow_fields(message, options.flow)
        message.folded = bool(options.fold)
    if view.result is not None:
        if view.result.startswith(RESULT_NOT_KEPT):
            message.result_problem = view.result[len(RESULT_NOT_KEPT) :].decode(errors="replace")
        else:
            message.result = view.result
    return message


def _flow_fields(message: pb.Job, flow: dict[str, object]) -> None:
    """A workflow's job: its workflow and batch, what the step before hands it, and whether its
    result goes on (then the worker sends it, as for a job that keeps its result)."""
    message.workflow_id = int(flow["w"])  # type: ignore[call-overload]
    message.batch_id = int(flow.get("b", 0))  # type: ignore[call-overload]
    if "in" in flow:
        message.input = str(flow["in"]).encode()
        message.has_input = True
    if flow.get("n") or flow.get("r"):
        message.wants_result = True


def push_message(batch: list[JobView], held: pb.AckResult | None) -> pb.TakeResponse | bytes:
    """A delivery: `batch` in a JobBatch, with the ack answers `held` for it. Plain jobs (no unique
    key, no options: nearly all) are encoded natively, straight to the message's bytes (the Take
    stream's serializer passes bytes through); the rest are built here, as `job_to_pb` shows them."""
    if all(not (v.record.unique_key or v.record.options) and v.result is None for v in batch):
        return encode_push(batch, held.SerializeToString() if held is not None else b"")
    message = pb.TakeResponse()
    add = message.jobs.jobs.add
    for job in batch:
        job_to_pb(job, add)
    if held is not None:
        message.jobs.ack_result.CopyFrom(held)
    return message


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
    response = pb.TakeResponse()  # filled in place: passing an answer to it would copy it whole
    answer = response.ack_result
    answer.acked.extend(job_id for job_id, _ in outcome.done)
    answer.rejected.extend(
        pb.Rejection(id=r.job_id, code=r.code, message=r.message) for r in outcome.rejected
    )
    _add_stray(answer, outcome)
    return response


def _add_stray(answer: pb.AckResult | pb.FailResult, outcome: Outcome) -> None:
    """The ids the stream does not hold, refused in bulk: bytes merged in, no object per id."""
    if outcome.stray:
        answer.MergeFromString(encode_refusals(outcome.stray, *NOT_HELD))


def fail_result(outcome: Outcome) -> pb.TakeResponse:
    response = pb.TakeResponse()
    answer = response.fail_result
    answer.failed.extend(
        pb.FailOutcome(id=job_id, status=pb.JobStatus.ValueType(status)) for job_id, status in outcome.done
    )
    answer.rejected.extend(
        pb.Rejection(id=r.job_id, code=r.code, message=r.message) for r in outcome.rejected
    )
    _add_stray(answer, outcome)
    return response


def _bounds(message: pb.Range) -> Bounds:
    return (
        message.min if message.HasField("min") else None,
        message.max if message.HasField("max") else None,
    )


def filter_from_pb(f: pb.JobFilter) -> JobFilter:
    statuses = []
    for value in f.statuses:
        try:
            statuses.append(Status(value))
        except ValueError:
            raise InvalidArgument(f"status {value} is not a job status (1 scheduled .. 5 dead)") from None
    return JobFilter(
        ids=tuple(f.ids),
        queues=tuple(f.queues),
        types=tuple(f.types),
        statuses=tuple(statuses),
        priority=_bounds(f.priority),
        run_at_ms=_bounds(f.run_at_ms),
        attempts=_bounds(f.attempts),
    )


def changes_from_pb(c: pb.JobChanges) -> Changes:
    options = None
    if c.HasField("backoff") or c.HasField("keep_completed_ms"):
        backoff = (
            (c.backoff.base_s, c.backoff.exponent, c.backoff.jitter_s) if c.HasField("backoff") else None
        )
        keep = c.keep_completed_ms if c.HasField("keep_completed_ms") else None
        options = JobOptions(backoff, keep).encode()
    return Changes(
        queue=c.queue if c.HasField("queue") else None,
        priority=c.priority if c.HasField("priority") else None,
        run_at_ms=c.run_at_ms if c.HasField("run_at_ms") else None,
        clear_run_at=c.clear_run_at,
        max_retries=c.max_retries if c.HasField("max_retries") else None,
        options=options,
        payload=c.payload if c.HasField("payload") else None,
        content_type=c.content_type if c.HasField("content_type") else None,
    )


def change_response(outcome: Outcome) -> pb.ChangeResponse:
    return pb.ChangeResponse(
        changed=[job_id for job_id, _ in outcome.done],
        rejected=[pb.Rejection(id=r.job_id, code=r.code, message=r.message) for r in outcome.rejected],
    )


def enqueue_response(ids: Iterable[tuple[int, bool]]) -> pb.EnqueueResponse:
    """An Enqueue's answer: (id, duplicate) per job."""
    response = pb.EnqueueResponse()
    add = response.jobs.add  # built in place: a message built apart is copied in
    for job_id, duplicate in ids:
        add(id=job_id, duplicate=duplicate)
    return response


def enqueue_refusal(code: grpc.StatusCode, message: str) -> pb.EnqueueResponse:
    """A refused request on EnqueueStream: answered in-band, the stream goes on."""
    return pb.EnqueueResponse(error=pb.Refusal(code=code.name, message=message))


def cron_to_pb(entry: CronEntry) -> pb.CronEntry:
    job = entry.job
    message = pb.CronEntry(
        name=entry.name,
        schedule=entry.schedule,
        timezone=entry.timezone,
        job=pb.NewJob(
            type=job.type,
            queue=job.queue,
            priority=job.priority,
            payload=job.payload,
            content_type=job.content_type,
            timeout_ms=job.timeout_ms,
        ),
        paused=entry.paused,
        last_run_ms=entry.last_tick_ms,
        problem=entry.problem(),
    )
    if not entry.paused and not message.problem:
        message.next_run_ms = entry.next_tick_ms()
    if job.max_retries >= 0:
        message.job.max_retries = job.max_retries
    return message


def fair_keys_message(
    queue: str, count: int, busiest: list[KeyWaiting], weights: dict[str, int]
) -> pb.FairKeys:
    return pb.FairKeys(
        queue=queue,
        key_count=count,
        keys=[
            pb.FairKey(
                fair_key=k.fair_key, waiting=k.waiting, oldest_seconds=k.oldest_seconds, weight=k.weight
            )
            for k in busiest
        ],
        weights=weights,
    )


def queue_info(
    name: str,
    paused: bool,
    counts: dict[str, int],
    limit: QueueLimit,
    activity: tuple[int, int, float] = (0, 0, 0.0),
) -> pb.QueueInfo:
    """`activity`: (enqueued, completed) since the start, and the oldest ready job's age in seconds."""
    return pb.QueueInfo(
        name=name,
        paused=paused,
        counts=counts,
        max_running=limit.max_running,
        rate_per_s=limit.rate_per_s,
        burst=limit.burst,
        key_max_running=limit.key_max_running,
        enqueued_total=activity[0],
        completed_total=activity[1],
        oldest_ready_seconds=activity[2],
    )


def new_job(engine: Engine, index: int, job: pb.NewJob, relative: bool = False) -> NewJob:
    """A NewJob from the wire, checked. `relative`: a workflow step's delay counts from when the
    step starts, so it is left to the step (not made a time now)."""
    if relative and job.HasField("completed_result"):
        raise InvalidArgument(f"job {index}: a workflow's step runs here: it cannot be a completed record")
    return engine.new_job(
        index,
        job.type,
        job.queue,
        job.priority if job.HasField("priority") else None,
        job.payload,
        job.content_type,
        run_at_ms=job.run_at_ms,
        delay_ms=0 if relative else job.delay_ms,
        max_retries=job.max_retries if job.HasField("max_retries") else None,
        timeout_ms=job.timeout_ms,
        backoff=(job.backoff.base_s, job.backoff.exponent, job.backoff.jitter_s)
        if job.HasField("backoff")
        else None,
        keep_completed_ms=job.keep_completed_ms if job.HasField("keep_completed_ms") else None,
        keep_result_ms=job.keep_result_ms if job.HasField("keep_result_ms") else None,
        unique_key=job.unique_key,
        unique_scope=job.unique_scope,
        headers=dict(job.headers) if job.headers else None,
        limit_key=job.limit_key,
        unique_in_queue=job.unique_in_queue,
        fold_key=job.fold_key,
        fold_max=job.fold_max,
        fair_key=job.fair_key,
        completed_result=job.completed_result if job.HasField("completed_result") else None,
    )
