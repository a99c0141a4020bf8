"""A Take stream that pipelines acks and never reads their answers is held by flow control: the
server reads a stream's messages only as fast as it applies them, so what one stream can make it
hold is bounded, whatever the stream sends."""

import threading
import time
from pathlib import Path
from typing import Any

import grpc
from harness import ServerProcess

from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

IDS = 10_000


def test_unread_acks_are_held_back_by_flow_control(server: ServerProcess) -> None:
    pulled = 0
    done = threading.Event()
    ack = pb.TakeRequest(ack=pb.Ack(ids=list(range(1, IDS + 1)), leases=[1] * IDS))  # ~100 KB of unknown ids

    def requests():  # type: ignore[no-untyped-def]
        nonlocal pulled
        yield pb.TakeRequest(subscribe=pb.Subscribe(queues=["q"], prefetch=IDS))
        while not done.is_set() and pulled < 2000:
            pulled += 1
            yield ack

    channel = grpc.insecure_channel(server.address)
    call = pb_grpc.QueueStub(channel).Take(requests(), timeout=60)  # its answers are never read
    deadline = time.monotonic() + 15
    while pulled < 2000 and time.monotonic() < deadline:
        time.sleep(0.1)
    sent = pulled
    assert server.proc is not None
    rss_mb = _rss_mb(server.proc.pid)
    done.set()
    call.cancel()
    channel.close()
    # 16 messages applied at once, and what gRPC's windows hold: far from the 2,000 (200 MB) an
    # unbounded reader takes in as fast as the client sends.
    print("SENT", sent, "RSS", rss_mb)
    assert sent < 500, f"the server read {sent} ack messages it could not answer"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_ids_a_stream_does_not_hold_are_each_refused_and_the_rest_answered(server: ServerProcess) -> None:
    import pyqueue

    with pyqueue.Client(server.address) as client:
        client.enqueue_many([{"type": "t", "queue": "q"}] * 2)
    channel = grpc.insecure_channel(server.address)
    sent: list[pb.TakeRequest] = [pb.TakeRequest(subscribe=pb.Subscribe(queues=["q"], prefetch=8))]
    ready = threading.Event()

    def requests():  # type: ignore[no-untyped-def]
        yield sent[0]
        ready.wait(30)
        yield from sent[1:]

    answers: Any = pb_grpc.QueueStub(channel).Take(requests(), timeout=60)
    jobs: list[pb.Job] = []
    while len(jobs) < 2:
        jobs += next(answers).jobs.jobs  # a heartbeat has none
    first, second = jobs[:2]
    strays = [1, 2, 3]
    sent.append(pb.TakeRequest(ack=pb.Ack(ids=[first.id, *strays, first.id], leases=[first.lease] * 5)))
    sent.append(
        pb.TakeRequest(
            fail=pb.Fail(failures=[pb.Failure(id=i, lease=second.lease, message="x") for i in [7, second.id]])
        )
    )
    ready.set()
    ack = next(m for m in answers if m.HasField("ack_result")).ack_result
    assert list(ack.acked) == [first.id]
    assert sorted(r.id for r in ack.rejected) == sorted([*strays, first.id])  # a repeat is refused
    assert {(r.code, r.message) for r in ack.rejected} == {
        ("FAILED_PRECONDITION", "not in flight on this stream")
    }
    fail = next(m for m in answers if m.HasField("fail_result")).fail_result
    assert [f.id for f in fail.failed] == [second.id]
    assert [(r.id, r.code) for r in fail.rejected] == [(7, "FAILED_PRECONDITION")]
    answers.cancel()
    channel.close()
