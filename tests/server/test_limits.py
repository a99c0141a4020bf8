"""Every limit and malformed request: the documented status, a message naming the fix, nothing written."""

import grpc
import pytest
from harness import ServerProcess

from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


@pytest.fixture
def small(tmp_path):  # type: ignore[no-untyped-def]
    server = ServerProcess(
        tmp_path / "data",
        "--max-payload-bytes",
        "100",
        "--max-jobs-per-enqueue",
        "5",
        "--max-name-length",
        "10",
        "--max-prefetch",
        "50",
    ).start()
    channel = grpc.insecure_channel(server.address)
    yield pb_grpc.QueueStub(channel)
    channel.close()
    server.close()


def job(**fields) -> pb.NewJob:  # type: ignore[no-untyped-def]
    return pb.NewJob(**{"type": "t", **fields})


CASES = [
    ("empty batch", [], grpc.StatusCode.INVALID_ARGUMENT, "no jobs"),
    (
        "too many jobs",
        [job() for _ in range(6)],
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "--max-jobs-per-enqueue",
    ),
    ("payload too big", [job(payload=b"x" * 101)], grpc.StatusCode.RESOURCE_EXHAUSTED, "--max-payload-bytes"),
    ("missing type", [pb.NewJob()], grpc.StatusCode.INVALID_ARGUMENT, "type name is empty"),
    ("type too long", [job(type="a" * 11)], grpc.StatusCode.INVALID_ARGUMENT, "--max-name-length"),
    ("bad queue chars", [job(queue="a b")], grpc.StatusCode.INVALID_ARGUMENT, "may hold only"),
    ("bad type chars", [job(type="é")], grpc.StatusCode.INVALID_ARGUMENT, "may hold only"),
    ("priority too high", [job(priority=65536)], grpc.StatusCode.INVALID_ARGUMENT, "0..65535"),
    (
        "one bad job spoils the batch",
        [job(), job(queue="no/slash")],
        grpc.StatusCode.INVALID_ARGUMENT,
        "job 1",
    ),
    (
        "content type too long",
        [job(content_type="x" * 200)],
        grpc.StatusCode.INVALID_ARGUMENT,
        "content type",
    ),
    (
        "too many headers",
        [job(headers={f"h{i}": "v" for i in range(17)})],
        grpc.StatusCode.INVALID_ARGUMENT,
        "limit is 16",
    ),
    (
        "header value too long",
        [job(headers={"traceparent": "x" * 1025})],
        grpc.StatusCode.INVALID_ARGUMENT,
        "1024 bytes",
    ),
    ("empty header name", [job(headers={"": "v"})], grpc.StatusCode.INVALID_ARGUMENT, "header name"),
]


@pytest.mark.parametrize(("name", "jobs", "code", "hint"), CASES, ids=[c[0] for c in CASES])
def test_enqueue_refusals_write_nothing(small, name, jobs, code, hint) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        small.Enqueue(pb.EnqueueRequest(jobs=jobs), timeout=10)
    assert info.value.code() == code
    assert hint in (info.value.details() or "")
    # Nothing was written: the only job a fresh enqueue creates is the first one delivered.
    marker = small.Enqueue(pb.EnqueueRequest(jobs=[job(type="marker")]), timeout=10).jobs[0].id
    responses = small.Take(
        iter([pb.TakeRequest(subscribe=pb.Subscribe(queues=["default", "a"], prefetch=50))]), timeout=5
    )
    first = next(r for r in responses if r.WhichOneof("kind") == "jobs")
    assert [j.id for j in first.jobs.jobs] == [marker]
    responses.cancel()


def test_get_unknown_job_is_not_found(small) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        small.GetJob(pb.GetJobRequest(id=12345), timeout=10)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("first", "hint"),
    [
        (pb.TakeRequest(ack=pb.Ack(ids=[1])), "first message"),
        (pb.TakeRequest(subscribe=pb.Subscribe(queues=[], prefetch=1)), "at least one queue"),
        (pb.TakeRequest(subscribe=pb.Subscribe(queues=["q"], prefetch=0)), "prefetch 0"),
        (pb.TakeRequest(subscribe=pb.Subscribe(queues=["q"], prefetch=51)), "--max-prefetch"),
        (pb.TakeRequest(subscribe=pb.Subscribe(queues=["bad name"], prefetch=1)), "may hold only"),
    ],
)
def test_malformed_take_streams_are_refused(small, first, hint) -> None:  # type: ignore[no-untyped-def]
    responses = small.Take(iter([first]), timeout=10)
    with pytest.raises(grpc.RpcError) as info:
        next(responses)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert hint in (info.value.details() or "")


def test_ack_of_a_job_not_held_is_rejected_per_job(small) -> None:  # type: ignore[no-untyped-def]
    job_id = small.Enqueue(pb.EnqueueRequest(jobs=[job()]), timeout=10).jobs[0].id
    requests = iter(
        [
            pb.TakeRequest(subscribe=pb.Subscribe(queues=["other"], prefetch=1)),
            pb.TakeRequest(ack=pb.Ack(ids=[job_id], leases=[1])),
            pb.TakeRequest(ack=pb.Ack(ids=[job_id])),  # no lease: names no attempt
        ]
    )
    responses = small.Take(requests, timeout=10)
    results = (r.ack_result for r in responses if r.WhichOneof("kind") == "ack_result")
    for code in ("FAILED_PRECONDITION", "INVALID_ARGUMENT"):
        result = next(results)
        assert list(result.acked) == []
        assert (result.rejected[0].id, result.rejected[0].code) == (job_id, code)
    responses.cancel()
    assert small.GetJob(pb.GetJobRequest(id=job_id), timeout=10).status == pb.JOB_STATUS_READY
