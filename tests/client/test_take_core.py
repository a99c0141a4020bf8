"""What both Take streams share (client/take_core.py), with no transport: an ack or a failure is
sent once and answered once, a refusal raises its code, and an ended stream fails what waits."""

from concurrent.futures import Future
from typing import Any

import pytest

import pyqueue
from pyqueue.client.take_core import Answers, read
from pyqueue.v1 import queue_pb2 as pb


class Pump:
    def __init__(self) -> None:
        self.jobs: list[int] = []
        self.cancelled: list[int] = []
        self.stopped = False

    def _on_jobs(self, jobs: Any) -> None:
        self.jobs += [j.id for j in jobs]

    def _on_cancel(self, job_ids: list[int]) -> None:
        self.cancelled += job_ids

    def _on_stopping(self) -> None:
        self.stopped = True


def test_answers_settle_each_future_once_and_the_end_fails_the_rest() -> None:
    answers: Answers[Future[None], Future[str]] = Answers(Future, Future)
    acked, new = answers.ack(1)
    again, second = answers.ack(1)
    assert new and not second and again is acked  # a repeated ack is the same answer, not resent
    refused, _ = answers.ack(2)
    failed, _ = answers.fail(3)
    waiting, _ = answers.fail(4)
    pump = Pump()
    read(
        pb.TakeResponse(
            jobs=pb.JobBatch(
                jobs=[pb.Job(id=9)],
                ack_result=pb.AckResult(
                    acked=[1], rejected=[pb.Rejection(id=2, code="NOT_FOUND", message="gone")]
                ),
            )
        ),
        answers,
        pump,
    )
    read(
        pb.TakeResponse(fail_result=pb.FailResult(failed=[pb.FailOutcome(id=3, status=pb.JOB_STATUS_DEAD)])),
        answers,
        pump,
    )
    read(pb.TakeResponse(cancel=pb.Cancel(ids=[9])), answers, pump)
    read(pb.TakeResponse(stopping=pb.Stopping()), answers, pump)
    assert acked.result(0) is None and failed.result(0) == "dead"
    with pytest.raises(pyqueue.NotFound, match="gone"):
        refused.result(0)
    assert (pump.jobs, pump.cancelled, pump.stopped) == ([9], [9], True)
    answers.end(pyqueue.Unavailable("the take stream ended"))
    with pytest.raises(pyqueue.Unavailable):
        waiting.result(0)
