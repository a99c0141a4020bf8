"""What a hostile or careless client sent to main and took the server down with: each is refused
with a status that names the fix, or served, and the server keeps running."""

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from harness import ServerProcess, check_store

import pyqueue
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

BIG = 2**63 - 1


@pytest.fixture
def stub(server: ServerProcess) -> Iterator[pb_grpc.QueueStub]:
    options = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
    channel = grpc.insecure_channel(server.address, options=options)
    yield pb_grpc.QueueStub(channel)
    channel.close()
    assert server.proc is not None and server.proc.poll() is None, "the server is still running"


def refused(call, request, code: grpc.StatusCode, hint: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=20)
    assert info.value.code() == code, info.value.details()
    assert hint in (info.value.details() or "")


@pytest.mark.parametrize(
    ("fields", "hint"),
    [
        ({"delay_ms": BIG}, "delay_ms"),
        ({"delay_ms": -1}, "delay_ms"),
        ({"run_at_ms": BIG}, "run_at_ms"),
        ({"keep_completed_ms": BIG}, "keep_completed_ms"),
        ({"keep_result_ms": BIG}, "keep_result_ms"),
        ({"max_retries": 10_001}, "max_retries"),
        ({"backoff": pb.Backoff(base_s=math.nan)}, "backoff.base_s"),
        ({"backoff": pb.Backoff(base_s=1e300)}, "backoff.base_s"),
        ({"backoff": pb.Backoff(exponent=1000)}, "backoff.exponent"),
        ({"backoff": pb.Backoff(jitter_s=math.inf)}, "backoff.jitter_s"),
        ({"timeout_ms": 2**32 - 1}, "timeout_ms"),
    ],
)
def test_out_of_range_numbers_are_refused_at_the_door(stub, fields, hint) -> None:  # type: ignore[no-untyped-def]
    refused(
        stub.Enqueue,
        pb.EnqueueRequest(jobs=[pb.NewJob(type="t", **fields)]),
        grpc.StatusCode.INVALID_ARGUMENT,
        hint,
    )
    assert stub.CountJobs(pb.CountJobsRequest(), timeout=20).count == 0, "nothing was written"


def test_update_checks_what_enqueue_checks(stub) -> None:  # type: ignore[no-untyped-def]
    job_id = (
        stub.Enqueue(pb.EnqueueRequest(jobs=[pb.NewJob(type="t", delay_ms=60_000)]), timeout=20).jobs[0].id
    )
    ids = pb.JobFilter(ids=[job_id])
    for changes, hint in [
        (pb.JobChanges(content_type="x" * 65536), "content type"),
        (pb.JobChanges(keep_completed_ms=BIG), "keep_completed_ms"),
        (pb.JobChanges(backoff=pb.Backoff(exponent=math.nan)), "backoff.exponent"),
        (pb.JobChanges(run_at_ms=-1), "run_at_ms"),
    ]:
        refused(
            stub.UpdateJobs,
            pb.UpdateJobsRequest(filter=ids, changes=changes),
            grpc.StatusCode.INVALID_ARGUMENT,
            hint,
        )
    assert stub.GetJob(pb.GetJobRequest(id=job_id), timeout=20).content_type == ""


def test_the_largest_backoff_schedules_its_retry_and_the_server_goes_on(server: ServerProcess) -> None:
    with pyqueue.Client(server.address) as client:
        job_id = client.enqueue("t", backoff=(365 * 24 * 3600.0, 10.0, 24 * 3600.0), max_retries=5).id
        with client.take("default") as stream:
            job = stream.next(timeout=20)
            assert job is not None
            assert job.fail("boom") == "scheduled"
        run_at = client.get_job(job_id).run_at
        assert run_at is not None and run_at.year >= 2027


def test_filters_cursors_and_limits_are_checked(stub) -> None:  # type: ignore[no-untyped-def]
    refused(stub.ListJobs, pb.ListJobsRequest(cursor="zz"), grpc.StatusCode.INVALID_ARGUMENT, "cursor")
    refused(stub.ListJobs, pb.ListJobsRequest(cursor="a1x"), grpc.StatusCode.INVALID_ARGUMENT, "cursor")
    refused(stub.ListJobs, pb.ListJobsRequest(cursor="a\u0661"), grpc.StatusCode.INVALID_ARGUMENT, "cursor")
    many = pb.JobFilter(queues=[f"q{i}" for i in range(300)])
    refused(
        stub.CountJobs, pb.CountJobsRequest(filter=many), grpc.StatusCode.RESOURCE_EXHAUSTED, "300 queues"
    )
    refused(
        stub.DeleteJobs, pb.DeleteJobsRequest(filter=many), grpc.StatusCode.RESOURCE_EXHAUSTED, "300 queues"
    )


def take(stub, *messages: pb.TakeRequest, prefetch: int = 10):  # type: ignore[no-untyped-def]
    subscribe = pb.TakeRequest(subscribe=pb.Subscribe(queues=["default"], prefetch=prefetch))
    return stub.Take(iter([subscribe, *messages]), timeout=20)


def test_an_ack_naming_more_jobs_than_a_stream_holds_ends_that_stream(stub) -> None:  # type: ignore[no-untyped-def]
    flood = pb.TakeRequest(ack=pb.Ack(ids=list(range(1, 1_000_001)), leases=[1] * 1_000_000))
    with pytest.raises(grpc.RpcError) as info:
        list(take(stub, flood))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "prefetch (10)" in (info.value.details() or "")


def test_a_second_subscribe_is_a_protocol_error(stub) -> None:  # type: ignore[no-untyped-def]
    again = pb.TakeRequest(subscribe=pb.Subscribe(queues=["default"], prefetch=1))
    with pytest.raises(grpc.RpcError) as info:
        list(take(stub, again))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_repeated_id_in_one_ack_completes_the_job_once(stub, server: ServerProcess) -> None:  # type: ignore[no-untyped-def]
    with pyqueue.Client(server.address) as client:
        client.enqueue("t", keep_completed=60)
    requests: list[pb.TakeRequest] = [pb.TakeRequest(subscribe=pb.Subscribe(queues=["default"], prefetch=2))]
    responses = stub.Take(iter_until(requests), timeout=20)
    job = next(r for r in responses if r.WhichOneof("kind") == "jobs").jobs.jobs[0]
    requests.append(pb.TakeRequest(ack=pb.Ack(ids=[job.id, job.id], leases=[job.lease, job.lease])))
    result = next(r for r in responses if r.WhichOneof("kind") == "ack_result").ack_result
    assert list(result.acked) == [job.id] and [r.code for r in result.rejected] == ["FAILED_PRECONDITION"]
    requests.append(pb.TakeRequest(ack=pb.Ack(ids=[job.id], leases=[job.lease])))  # and again, later
    result = next(r for r in responses if r.WhichOneof("kind") == "ack_result").ack_result
    assert list(result.acked) == []
    responses.cancel()
    (queue,) = stub.ListQueues(pb.ListQueuesRequest(), timeout=20).queues
    assert dict(queue.counts) == {"completed": 1}


def iter_until(requests: list[pb.TakeRequest]) -> Iterator[pb.TakeRequest]:
    """Yield what the test appends to `requests`, as it appends it."""
    sent = 0
    while True:
        while sent < len(requests):
            yield requests[sent]
            sent += 1
        time.sleep(0.01)


def test_error_text_is_cut_to_its_limit(server: ServerProcess) -> None:
    with pyqueue.Client(server.address) as client:
        job_id = client.enqueue("t").id
        with client.take("default") as stream:
            job = stream.next(timeout=20)
            assert job is not None
            job.fail("m" * (8 << 20), backtrace="b" * (8 << 20))
        (error,) = client.job_errors(job_id)
        assert len(error.message) < 20_000 and "[cut: 8388608 bytes" in error.message
        assert len(error.backtrace) < 70_000


def test_jobs_of_the_largest_payload_are_delivered_at_any_prefetch(server: ServerProcess) -> None:
    payload = b"p" * (1 << 20)  # the default --max-payload-bytes
    with pyqueue.Client(server.address) as client:
        for _ in range(8):
            client.enqueue_many([{"type": "t", "payload": payload}] * 10)
        got = 0
        with client.take("default", prefetch=64) as stream:
            while got < 80:
                job = stream.next(timeout=60)
                assert job is not None, f"only {got} of 80 came"
                assert job.payload == payload
                job.ack()
                got += 1
        assert client.count_jobs() == 0


def test_the_router_passes_messages_as_large_as_the_shards_do(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            client.enqueue_many([{"type": "t", "payload": b"x" * 200_000}] * 30)
            assert len(list(client.list_jobs(page_size=100))) == 30
        channel = grpc.insecure_channel(
            server.address, options=[("grpc.max_receive_message_length", 64 << 20)]
        )
        page = pb_grpc.QueueStub(channel).ListJobs(pb.ListJobsRequest(limit=100), timeout=20)
        assert len(page.jobs) == 30
        channel.close()
    finally:
        server.close()


def test_a_request_that_fails_inside_the_writer_fails_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    trigger = tmp_path / "ack-fails"
    server = ServerProcess(tmp_path / "data", env={"PYQUEUE_FAILPOINT_ACK": str(trigger)}).start()
    try:
        with pyqueue.Client(server.address) as client:
            client.enqueue_many([{"type": "t"}, {"type": "t"}])
            with client.take("default", prefetch=2) as stream:
                a, b = stream.next(timeout=20), stream.next(timeout=20)
                assert a is not None and b is not None
                trigger.touch()
                with pytest.raises(pyqueue.PyQueueError, match="failed at this request"):
                    a.ack()
                trigger.unlink()
                b.ack()
                assert client.enqueue("t").id, "the server goes on taking work"
            # The failed ack changed nothing: the job is in flight until the stream's end hands it
            # back, which the server writes just after the stream ends (so wait for it).
            deadline = time.monotonic() + 30
            while (status := client.get_job(a.id).status) == "in_flight" and time.monotonic() < deadline:
                time.sleep(0.02)
            assert status == "ready", "the failed ack changed nothing"
        assert server.proc is not None and server.proc.poll() is None
    finally:
        server.close()


def test_a_job_whose_handling_fails_inside_the_writer_is_dead_and_the_rest_go_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    poison = tmp_path / "poison"
    server = ServerProcess(tmp_path / "data", env={"PYQUEUE_FAILPOINT_ACK_JOB": str(poison)}).start()
    try:
        with pyqueue.Client(server.address) as client:
            client.enqueue_many([{"type": "t"}] * 3)
            with client.take("default", prefetch=3) as stream:
                a, b, c = (stream.next(timeout=20) for _ in range(3))
                assert a is not None and b is not None and c is not None
                poison.write_text(f"{b.id}\n")
                answers = [stream.ack(job) for job in (a, b, c)]
                assert answers[0].result(timeout=20) is None and answers[2].result(timeout=20) is None
                with pytest.raises(pyqueue.PyQueueError, match=f"job {b.id} is dead: the server failed"):
                    answers[1].result(timeout=20)
            for done in (a, c):  # completed and deleted (keep_completed is 0 by default)
                with pytest.raises(pyqueue.NotFound):
                    client.get_job(done.id)
            dead = client.get_job(b.id)
            assert (dead.status, dead.attempts) == ("dead", 1)
            (error,) = client.job_errors(b.id)
            assert error.kind == "internal" and "injected failure" in error.message
            assert client.enqueue("t").id, "the server goes on taking work"
        assert server.proc is not None and server.proc.poll() is None
    finally:
        server.close()
    report = check_store(tmp_path / "data")
    assert report.returncode == 0, report.stdout + report.stderr


def test_streams_that_never_read_hold_a_bounded_share_of_the_backlog(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--max-stream-bytes", str(4 << 20)).start()
    hold = threading.Event()
    channel = grpc.insecure_channel(server.address)
    stub = pb_grpc.QueueStub(channel)

    def never_reads() -> Iterator[pb.TakeRequest]:
        yield pb.TakeRequest(subscribe=pb.Subscribe(queues=["default"], prefetch=1000))
        hold.wait(60)

    try:
        with pyqueue.Client(server.address) as client:
            for _ in range(12):
                client.enqueue_many([{"type": "t", "payload": b"p" * (1 << 20)}] * 10)
            calls = [stub.Take(never_reads(), timeout=60) for _ in range(10)]
            # Each stream gets 4 MiB of payload (four 1 MiB jobs) and no more, whatever its prefetch.
            deadline = time.monotonic() + 30
            while client.count_jobs(status="in_flight") < 40 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert client.count_jobs(status="in_flight") == 40
            assert client.count_jobs(status="ready") == 80
            hold.set()
            for call in calls:
                call.cancel()
    finally:
        hold.set()
        channel.close()
        server.close()


def test_streams_past_the_limit_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--max-streams", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            first, second = client.take("default", prefetch=1), client.take("default", prefetch=1)
            client.enqueue_many([{"type": "t"}, {"type": "t"}])
            assert first.next(timeout=30) is not None and second.next(timeout=30) is not None  # both served
            with pytest.raises(pyqueue.ResourceExhausted, match="--max-streams"):
                client.take("default").next(timeout=30)
            first.close()
            second.close()
    finally:
        server.close()


def test_connections_past_the_cap_are_closed_and_take_no_descriptors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import select
    import socket

    server = ServerProcess(tmp_path / "data", "--max-connections", "20").start()
    assert server.proc is not None
    flood: list[socket.socket] = []
    try:
        descriptors = len(os.listdir(f"/proc/{server.proc.pid}/fd"))
        for _ in range(300):
            flood.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        # Past the cap the server closes each connection at once: wait for the end of those (a
        # positive marker), however slowly the server gets to them.
        # (Without a cap, grpc holds each one until its handshake times out, seconds later.)
        closed: set[socket.socket] = set()
        most = 0
        deadline = time.monotonic() + 60
        while len(closed) < 280 and time.monotonic() < deadline:
            most = max(most, len(os.listdir(f"/proc/{server.proc.pid}/fd")))
            readable, _, _ = select.select([s for s in flood if s not in closed], [], [], 1)
            for s in readable:
                if s.recv(1 << 16) == b"":
                    closed.add(s)
        assert len(closed) >= 280, f"only {len(closed)} of the 300 connections were closed"
        assert most < descriptors + 20 + 16, f"{most - descriptors} descriptors taken by 300 connections"
    finally:
        for s in flood:
            s.close()
    try:
        with pyqueue.Client(server.address) as client:
            assert client.enqueue("t").id  # the flood is gone; serving as before
        assert server.proc.poll() is None
    finally:
        server.close()


@pytest.mark.parametrize("shards", [1, 2])
def test_one_connection_cannot_take_every_stream_slot(tmp_path, shards: int) -> None:  # type: ignore[no-untyped-def]
    """--max-streams-per-connection: a greedy client is refused its third stream, and an honest
    worker on a connection of its own still gets one (through the router too, which passes each
    client's own connection on)."""
    server = ServerProcess(
        tmp_path / "data", "--shards", str(shards), "--max-streams", "10", "--max-streams-per-connection", "2"
    ).start()

    ended = threading.Event()

    def take(channel: grpc.Channel) -> Any:
        subscribe = pb.TakeRequest(subscribe=pb.Subscribe(queues=["q"], prefetch=1))
        call = pb_grpc.QueueStub(channel).Take(_hold(subscribe, ended), timeout=60)
        return call, iter(call)

    own = [("grpc.use_local_subchannel_pool", 1)]  # a connection each (grpc shares one otherwise)
    greedy, honest = (grpc.insecure_channel(server.address, options=own) for _ in range(2))
    try:
        held = [take(greedy) for _ in range(2)]
        with pyqueue.Client(server.address) as client:
            client.enqueue_many([{"type": "t", "queue": "q"}] * 2)
        for _, answers in held:
            assert next(answers).HasField("jobs")  # both served
        _, refused = take(greedy)
        with pytest.raises(grpc.RpcError) as third:
            next(refused)
        assert third.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--max-streams-per-connection" in (third.value.details() or "")
        call, answers = take(honest)
        with pyqueue.Client(server.address) as client:
            client.enqueue("t", queue="q")
        assert next(answers).HasField("jobs"), "the honest worker's stream is served"
        call.cancel()
        for call, _ in held:
            call.cancel()
    finally:
        ended.set()
        greedy.close()
        honest.close()
        server.close()


def _hold(first: pb.TakeRequest, ended: threading.Event) -> Iterator[pb.TakeRequest]:
    """A stream's requests: the subscribe, then nothing until the test ends (the call stays open)."""
    yield first
    ended.wait(60)
