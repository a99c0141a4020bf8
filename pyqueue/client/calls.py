"""The client's calls, each written once, with no transport (after httpcore's sans-I/O core).

A `Call` says which RPC, where it goes (the public address, or the shard that owns a job), the
request, and how its answer reads. A method of several calls (`update_job`: change, then read
back) is a generator that yields its calls and gets their answers back (`Steps`). `Client` and
`AsyncClient` only carry them over their channel (`_run`, `_drive`): a change to a call is made
here, once, and both clients have it.

Enqueueing, taking and finding routes are not here: they batch, stream and cache, and are the
transports' own (client.py, aio.py, take.py, aio_take.py).
"""

import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pyqueue.client.answers import JobError, error_from_pb, result_of
from pyqueue.client.history import History
from pyqueue.client.job import Job
from pyqueue.client.spec import cron_message, new_job_message
from pyqueue.client.steering import (
    CRON_ACTIONS,
    ChangeResult,
    CronInfo,
    FairKeys,
    QueueInfo,
    WorkerInfo,
    job_changes,
    job_filter,
    limit_request,
)
from pyqueue.client.workflows import BatchInfo, StepLike, Task, WorkflowRun, as_step, workflow_request
from pyqueue.errors import InvalidArgument, from_code_name
from pyqueue.v1 import queue_pb2 as pb

T = TypeVar("T")

MAX_WAIT_S = 60.0  # one WaitJob call (the server's cap)
ENDED = ("completed", "dead", "cancelled")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str  # the Queue RPC
    request: Any
    read: Callable[[Any], T]
    job_id: int | None = None  # to the shard that owns this job; None: the public address
    timeout: float | None = None  # seconds; None: the client's
    extra_timeout: float = 0.0  # added to the client's (a long wait)


Steps = Generator[Call[Any], Any, T]


def get_job(job_id: int) -> Call[Job]:
    return Call("GetJob", pb.GetJobRequest(id=job_id), Job.from_pb, job_id=job_id)


def job_by_key(queue: str, unique_key: str) -> Call[Job]:
    request = pb.GetJobRequest(queue=queue, unique_key=unique_key)
    return Call("GetJob", request, Job.from_pb)


def wait_job(job_id: int, timeout: float | None) -> Steps[Job]:
    """The job once it has ended, or as it is after `timeout` seconds (None: no limit): one long
    wait at a time (the server answers when the job ends), at most a minute each."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = MAX_WAIT_S if deadline is None else max(0.0, min(MAX_WAIT_S, deadline - time.monotonic()))
        request = pb.WaitJobRequest(id=job_id, timeout_ms=int(left * 1000))
        job: Job = yield Call("WaitJob", request, Job.from_pb, job_id=job_id, extra_timeout=left)
        if job.status in ENDED or (deadline is not None and time.monotonic() >= deadline):
            return job


def result(job_id: int, timeout: float | None) -> Steps[Any]:
    job = yield from wait_job(job_id, timeout)
    history = (yield job_errors(job_id)) if job.status == "dead" else ()
    return result_of(job, history)


def job_errors(job_id: int) -> Call[list[JobError]]:
    return Call(
        "ListErrors",
        pb.ListErrorsRequest(id=job_id),
        lambda answer: [error_from_pb(e) for e in answer.errors],
        job_id=job_id,
    )


def list_page(
    cursor: str, limit: int, descending: bool, filters: dict[str, Any]
) -> Call[tuple[list[Job], str, str]]:
    request = pb.ListJobsRequest(
        filter=job_filter(**filters), limit=limit, descending=descending, cursor=cursor
    )
    return Call(
        "ListJobs",
        request,
        lambda answer: ([Job.from_pb(j) for j in answer.jobs], answer.next_cursor, answer.prev_cursor),
    )


def count_jobs(filters: dict[str, Any]) -> Call[int]:
    return Call(
        "CountJobs", pb.CountJobsRequest(filter=job_filter(**filters)), lambda answer: int(answer.count)
    )


def update_jobs(changes: Mapping[str, Any], filters: dict[str, Any]) -> Call[ChangeResult]:
    request = pb.UpdateJobsRequest(filter=job_filter(**filters), changes=job_changes(**changes))
    return Call("UpdateJobs", request, ChangeResult.from_pb)


def update_job(job_id: int, changes: Mapping[str, Any]) -> Steps[Job]:
    _refused((yield update_jobs(changes, {"ids": [job_id]})))
    job: Job = yield get_job(job_id)
    return job


def change(method: str, filters: dict[str, Any]) -> Call[ChangeResult]:
    """CancelJobs, RetryJobs or DeleteJobs over the jobs the filters select."""
    request = getattr(pb, f"{method}Request")(filter=job_filter(**filters))
    return Call(method, request, ChangeResult.from_pb)


def delete_job(job_id: int) -> Steps[None]:
    _refused((yield change("DeleteJobs", {"ids": [job_id]})))


def _refused(result: ChangeResult) -> None:
    if result.rejected:
        raise from_code_name(result.rejected[0].code, result.rejected[0].message)


def queues() -> Call[list[QueueInfo]]:
    return Call(
        "ListQueues", pb.ListQueuesRequest(), lambda answer: [QueueInfo.from_pb(q) for q in answer.queues]
    )


def workers() -> Call[list[WorkerInfo]]:
    return Call(
        "ListWorkers", pb.ListWorkersRequest(), lambda answer: [WorkerInfo.from_pb(w) for w in answer.workers]
    )


def set_cron(entries: Iterable[Mapping[str, Any]]) -> Call[list[CronInfo]]:
    request = pb.SetCronRequest(entries=[cron_message(e) for e in entries])
    return Call("SetCron", request, _cron_entries)


def cron_entries() -> Call[list[CronInfo]]:
    return Call("ListCron", pb.ListCronRequest(), _cron_entries)


def _cron_entries(answer: Any) -> list[CronInfo]:
    return [CronInfo.from_pb(e) for e in answer.entries]


def change_cron(name: str, action: str) -> Call[CronInfo]:
    return Call("ChangeCron", pb.ChangeCronRequest(name=name, action=CRON_ACTIONS[action]), CronInfo.from_pb)


def backup(path: str, timeout: float) -> Call[list[int]]:
    return Call("Backup", pb.BackupRequest(path=path), lambda answer: list(answer.sequences), timeout=timeout)


def history(queue: str, total: bool) -> Call[History]:
    return Call("History", pb.HistoryRequest(queue=queue, total=total), History.from_pb)


def metrics() -> Call[str]:
    return Call("Metrics", pb.MetricsRequest(), lambda answer: str(answer.text))


def set_queue_limit(
    queue: str, max_running: int, rate: float | str | None, burst: float, key_max_running: int
) -> Call[QueueInfo]:
    request = limit_request(queue, max_running, rate, burst, key_max_running)
    return Call("SetQueueLimit", request, QueueInfo.from_pb)


def set_fair_weight(queue: str, fair_key: str, weight: int) -> Call[FairKeys]:
    if not 0 <= weight < 2**32:  # beyond the wire's uint32; the server checks the real bound
        raise InvalidArgument(f"weight {weight} is outside 1..10000 (1 is every key's default)")
    request = pb.SetFairWeightRequest(queue=queue, fair_key=fair_key, weight=weight)
    return Call("SetFairWeight", request, FairKeys.from_pb)


def fair_keys(queue: str, limit: int) -> Call[FairKeys]:
    return Call("ListFairKeys", pb.ListFairKeysRequest(queue=queue, limit=limit), FairKeys.from_pb)


def pause(queue: str, paused: bool) -> Call[QueueInfo]:
    return Call("PauseQueue" if paused else "ResumeQueue", pb.QueueRequest(queue=queue), QueueInfo.from_pb)


def enqueue_workflow(step: StepLike) -> Call[WorkflowRun]:
    return Call("EnqueueWorkflow", workflow_request(step), WorkflowRun.from_pb)


def add_to_batch(batch_id: int, jobs: Iterable[StepLike]) -> Call[list[int]]:
    messages = []
    for job in jobs:
        step = as_step(job)
        if not isinstance(step, Task):
            raise TypeError("only jobs are added to a batch")
        if step.check is not None:
            step.check(False)
        messages.append(new_job_message(step.spec))
    request = pb.AddToBatchRequest(batch_id=batch_id, jobs=messages)
    return Call("AddToBatch", request, lambda answer: list(answer.indexes), job_id=batch_id)


def batch(batch_id: int) -> Call[BatchInfo]:
    return Call("GetBatch", pb.GetBatchRequest(id=batch_id), BatchInfo.from_pb, job_id=batch_id)


def batches(limit: int, before: int) -> Call[list[BatchInfo]]:
    request = pb.ListBatchesRequest(limit=limit, before=before)
    return Call("ListBatches", request, lambda answer: [BatchInfo.from_pb(b) for b in answer.batches])


def workflow_change(method: str, workflow_id: int) -> Call[ChangeResult]:
    return Call(method, pb.WorkflowRequest(workflow_id=workflow_id), ChangeResult.from_pb)
