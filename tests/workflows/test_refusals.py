"""Bad workflows are refused whole, with a status and a message that says what to fix, and
nothing is written: a cycle, a step named twice or never, a callback that is not a job, a member
whose chain holds a group, more jobs than --max-workflow-jobs, a unique key, a fold key, steps nested past 256;
a result too large to hand on fails its attempt instead of starting the next step."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from harness import ServerProcess

import pyqueue
from pyqueue.client.spec import new_job_message
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


@pytest.fixture
def small(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path / "data",
        "--max-workflow-jobs", "5", "--max-batch-jobs", "8", "--max-payload-bytes", "2000", "--keep-dead", "3600",
    ).start()  # fmt: skip
    yield server
    server.close()


def job(queue: str = "q") -> pb.NewJob:
    return new_job_message({"type": "t", "queue": queue})


CASES = {
    "a cycle": ([pb.Step(job=job(), next=2), pb.Step(job=job(), next=1)], "no cycles"),
    "a step named twice": (
        [pb.Step(group=True, members=[2, 2]), pb.Step(job=job())],
        "named twice",
    ),
    "a step not reached": ([pb.Step(job=job()), pb.Step(job=job())], "not reached"),
    "a callback that is a group": (
        [pb.Step(group=True, members=[2], on_complete=3), pb.Step(job=job()), pb.Step(group=True)],
        "must be a job step",
    ),
    "a member whose chain holds a group": (
        [
            pb.Step(group=True, members=[2]),
            pb.Step(job=job(), next=3),
            pb.Step(group=True, members=[4]),
            pb.Step(job=job()),
        ],
        "member 0 of step 0: its step 1 is a group: a member is a job or a chain of jobs",
    ),
    "a step of no kind": ([pb.Step()], "neither a job nor a group"),
    "a reference past the steps": ([pb.Step(job=job(), next=9)], "there are 1"),
    "a unique key": ([pb.Step(job=new_job_message({"type": "t", "unique_key": "k"}))], "unique key"),
    "a fold key": (
        [pb.Step(job=pb.NewJob(type="t", payload=b"[]", content_type="application/json", fold_key="k"))],
        "cannot be folded",
    ),
    # Checked now, not when the step is made: a later step's delay past its range made the ack
    # of the job before it fail inside the server (the job buried dead), long after this call.
    "a later step's delay past its range": (
        [pb.Step(job=job(), next=2), pb.Step(job=new_job_message({"type": "t", "delay": 2**62 / 1000}))],
        "step 1: delay_ms",
    ),
    "a negative keep": ([pb.Step(group=True, members=[2], keep_ms=-5), pb.Step(job=job())], "keep_ms -5"),
    "a group name too long": (
        [pb.Step(group=True, members=[2], name="x" * 1000), pb.Step(job=job())],
        "--max-name-length",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_bad_workflow_is_refused_and_writes_nothing(small: ServerProcess, case: str) -> None:
    steps, says = CASES[case]
    with grpc.insecure_channel(small.address) as channel:
        stub = pb_grpc.QueueStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.EnqueueWorkflow(pb.EnqueueWorkflowRequest(steps=steps), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert says in (refused.value.details() or "")
    with pyqueue.Client(small.address) as client:
        assert client.count_jobs() == 0 and client.batches() == []


def test_more_jobs_than_the_limit_in_one_call_is_resource_exhausted(small: ServerProcess) -> None:
    with pyqueue.Client(small.address) as client:
        members = [pyqueue.Task({"type": "t"}) for _ in range(5)]
        with pytest.raises(pyqueue.ResourceExhausted, match="--max-workflow-jobs"):
            client.enqueue_workflow(pyqueue.Batch(members, on_complete=pyqueue.Task({"type": "cb"})))
        assert client.count_jobs() == 0 and client.batches() == []


def test_a_result_too_large_to_hand_on_fails_its_attempt(small: ServerProcess) -> None:
    with pyqueue.Client(small.address) as client:
        step = pyqueue.Task({"type": "big", "queue": "q", "max_retries": 0}).then(
            pyqueue.Task({"type": "next"})
        )
        run = client.enqueue_workflow(step)
        with client.take("q") as stream:
            taken = stream.next(timeout=30)
            assert taken is not None and taken.wants_result
            taken.ack("x" * 3000)  # over --max-payload-bytes: not kept, so not handed on
        job = client.get_job(run.job_id)
        assert job.status == "dead"
        (error,) = client.job_errors(run.job_id)
        assert error.error_type == "ResultNotHandedOn" and "hands on" in error.message
        assert client.count_jobs(types=["next"]) == 0


def test_a_chain_runs_256_steps_deep_and_one_more_is_refused_clearly(tmp_path: Path) -> None:
    # A job carries the steps after it nested in its options: 500 steps failed inside the
    # server (RecursionError) where --max-workflow-jobs allows 10,000 jobs.
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            step = {"type": "t", "queue": "long"}
            with pytest.raises(pyqueue.InvalidArgument, match="nest more than 256 deep"):
                client.enqueue_workflow(pyqueue.Chain(*[step] * 257))
            assert client.count_jobs() == 0
            client.enqueue_workflow(pyqueue.Chain(*[step] * 256))
            with client.take("long") as stream:
                for n in range(256):
                    taken = stream.next(timeout=30)
                    assert taken is not None, f"step {n} never came"
                    assert taken.input == (n - 1 if n else None)
                    taken.ack(n)
            assert client.count_jobs(statuses=["ready", "scheduled", "in_flight"]) == 0
    finally:
        server.close()


def test_the_largest_ids_are_answered_not_failed(small: ServerProcess) -> None:
    # 2**64 - 1 is a valid uint64 any client may send: its key range made the request fail.
    with pyqueue.Client(small.address) as client, pytest.raises(pyqueue.NotFound):
        client.job_errors(2**64 - 1)
    assert not [line for line in small.lines if "Traceback" in line]


def test_a_batch_holds_what_its_limits_say(small: ServerProcess) -> None:
    with pyqueue.Client(small.address) as client:
        run = client.enqueue_workflow(pyqueue.Batch([pyqueue.Task({"type": "t", "queue": "slow"})]))
        six = [pyqueue.Task({"type": "t", "queue": "slow"}) for _ in range(6)]
        with pytest.raises(pyqueue.ResourceExhausted, match="--max-workflow-jobs"):
            client.add_to_batch(run.batch_id, six)  # more than one call may enqueue
        assert client.batch(run.batch_id).total == 1
        assert client.add_to_batch(run.batch_id, six[:5]) == [1, 2, 3, 4, 5]
        with pytest.raises(pyqueue.ResourceExhausted, match="--max-batch-jobs"):
            client.add_to_batch(run.batch_id, six[:3])  # 9 would pass the 8 a batch may hold
        assert client.batch(run.batch_id).total == 6 and client.count_jobs(queue="slow") == 6
        assert client.add_to_batch(run.batch_id, six[:2]) == [6, 7]


@pytest.mark.parametrize("shards", ["1", "2"])
def test_a_workflow_that_never_existed_is_not_found_and_nothing_is_written(
    tmp_path: Path, shards: str
) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", shards).start()
    try:
        with pyqueue.Client(server.address) as client:
            for workflow_id in (0, 2**64 - 1, 12345678):
                with pytest.raises(pyqueue.NotFound, match="not known"):
                    client.cancel_workflow(workflow_id)
                with pytest.raises(pyqueue.NotFound, match="not known"):
                    client.retry_workflow(workflow_id)
            # One that exists is cancelled everywhere (a step on the other shard would be made cancelled).
            run = client.enqueue_workflow(
                pyqueue.Task({"type": "a", "queue": "one"}).then(pyqueue.Task({"type": "b"}))
            )
            assert client.cancel_workflow(run.workflow_id).changed == [run.job_id]
            assert client.retry_workflow(run.workflow_id).changed == []
    finally:
        server.close()


def test_a_range_whose_min_is_above_its_max_is_refused(small: ServerProcess) -> None:
    with grpc.insecure_channel(small.address) as channel:
        stub = pb_grpc.QueueStub(channel)
        f = pb.JobFilter(queues=["q"], priority=pb.Range(min=10, max=5))
        calls: list[Any] = [
            lambda: stub.ListJobs(pb.ListJobsRequest(filter=f), timeout=10),
            lambda: stub.CountJobs(pb.CountJobsRequest(filter=f), timeout=10),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "min 10 is above its max 5" in (refused.value.details() or "")
