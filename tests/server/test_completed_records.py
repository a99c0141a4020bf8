"""Records of jobs that ran elsewhere (NewJob.completed_result) and GetJob by unique key: how an
outside runner (Celery's result backend) keeps its outcomes in pyqueue."""

import grpc
import pytest
from harness import ServerProcess, assert_nothing_else_comes

import pyqueue
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


def test_a_record_is_completed_at_once_with_its_result_and_never_runs(client: pyqueue.Client) -> None:
    record = client.enqueue(
        "celery.task",
        queue="results",
        unique_key="t-1",
        completed_result={"status": "SUCCESS"},
        keep_result=60,
    )
    job = client.get_job(record.id)
    assert job.status == "completed" and job.result() == {"status": "SUCCESS"}
    with client.take("results") as stream:
        assert_nothing_else_comes(client, stream, queue="results")
    assert (
        client.count_jobs(queues=["results"], statuses=["completed"]) == 1
    )  # the record (the marker went at its ack)


def test_the_lookup_by_key_finds_the_newest_record(client: pyqueue.Client) -> None:
    for state in ("STARTED", "RETRY", "SUCCESS"):
        client.enqueue("t", queue="results", unique_key="task-9", completed_result=state, keep_result=60)
    assert client.job_by_key("results", "task-9").result() == "SUCCESS"
    with pytest.raises(pyqueue.NotFound, match="holds the unique key 'task-8'"):
        client.job_by_key("results", "task-8")
    with pytest.raises(pyqueue.NotFound):  # the key is held within its own queue only
        client.job_by_key("elsewhere", "task-9")


def test_an_ordinary_job_is_found_by_its_key_whatever_its_status(client: pyqueue.Client) -> None:
    waiting = client.enqueue("t", queue="q", unique_key="order-1")
    assert client.job_by_key("q", "order-1").id == waiting.id
    with client.take("q") as stream:
        job = stream.next(timeout=30)
        assert job is not None and job.id == waiting.id
        assert client.job_by_key("q", "order-1").status == "in_flight"
        job.ack()


def test_bad_records_and_lookups_are_refused_and_write_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()  # --keep-completed 0, the default
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.QueueStub(channel)
            refusals = {
                "keep_result_ms above 0": pb.NewJob(type="t", completed_result=b"1"),
                "completed_result: ": pb.NewJob(type="t", completed_result=b"{not json", keep_result_ms=1000),
                "no run_at, delay or fold key": pb.NewJob(
                    type="t", completed_result=b"1", keep_result_ms=1000, delay_ms=5000
                ),
            }
            for message, job in refusals.items():
                with pytest.raises(grpc.RpcError) as refused:
                    stub.Enqueue(pb.EnqueueRequest(jobs=[job]))
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert message in (refused.value.details() or "")
            for request, message in (
                (pb.GetJobRequest(unique_key="k"), "needs both"),
                (pb.GetJobRequest(queue="q", unique_key="a\nb"), "printable"),
            ):
                with pytest.raises(grpc.RpcError) as refused:
                    stub.GetJob(request)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert message in (refused.value.details() or "")
            assert stub.CountJobs(pb.CountJobsRequest()).count == 0
    finally:
        server.close()


def test_records_and_lookups_across_shards(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            for n in range(8):  # queues on both shards
                client.enqueue("t", queue=f"r{n}", unique_key="k", completed_result=n, keep_result=60)
            assert [client.job_by_key(f"r{n}", "k").result() for n in range(8)] == list(range(8))
    finally:
        server.close()
