"""The client's calls without a transport (client/calls.py): each says what it asks and reads what
it is answered; a method of several calls is driven here by hand, as each client drives it."""

from typing import Any

import pytest

import pyqueue
from pyqueue.client import calls
from pyqueue.v1 import queue_pb2 as pb


def _drive(steps: calls.Steps[Any], answers: list[Any]) -> tuple[list[calls.Call[Any]], Any]:
    asked = []
    try:
        call = next(steps)
        while True:
            asked.append(call)
            call = steps.send(call.read(answers.pop(0)))
    except StopIteration as done:
        return asked, done.value


def test_a_refused_update_raises_its_code_and_asks_nothing_more() -> None:
    refused = pb.ChangeResponse(
        rejected=[pb.Rejection(id=7, code="FAILED_PRECONDITION", message="in flight")]
    )
    with pytest.raises(pyqueue.FailedPrecondition, match="in flight"):
        _drive(calls.update_job(7, {"priority": 1}), [refused])


def test_an_update_reads_the_job_back_from_its_shard() -> None:
    asked, job = _drive(
        calls.update_job(7, {"priority": 1}),
        [pb.ChangeResponse(changed=[7]), pb.Job(id=7, priority=1, status=pb.JOB_STATUS_READY)],
    )
    assert [c.method for c in asked] == ["UpdateJobs", "GetJob"]
    assert asked[1].job_id == 7 and (job.id, job.priority, job.status) == (7, 1, "ready")


def test_waiting_asks_again_until_the_job_ends_then_a_dead_ones_history_is_read() -> None:
    waiting = pb.Job(id=3, status=pb.JOB_STATUS_IN_FLIGHT)
    dead = pb.Job(id=3, status=pb.JOB_STATUS_DEAD)
    history = pb.ListErrorsResponse(errors=[pb.JobError(attempt=1, message="boom", error_type="KeyError")])
    with pytest.raises(pyqueue.JobFailed, match="boom"):
        _drive(calls.result(3, None), [waiting, dead, history])


def test_each_call_names_its_rpc_and_route() -> None:
    assert calls.get_job(5).job_id == 5 and calls.job_errors(5).job_id == 5
    assert calls.count_jobs({"queue": "q"}).job_id is None  # the public address: it spans shards
    assert calls.backup("/x", 600).timeout == 600
    assert {calls.pause("q", True).method, calls.pause("q", False).method} == {"PauseQueue", "ResumeQueue"}
    assert {calls.change(m, {}).method for m in ("CancelJobs", "RetryJobs", "DeleteJobs")} == {
        "CancelJobs",
        "RetryJobs",
        "DeleteJobs",
    }
