"""How the kept-open enqueue stream reports a stream that breaks, against a real gRPC server on
loopback: a cancel by the server (a stopping server cancels what its grace did not see finish) is
UNAVAILABLE, which the failover rule may send again; only the client's own watchdog makes a
timeout."""

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from pyqueue.client.enqueue_stream import StreamedEnqueues
from pyqueue.errors import PyQueueError, Unavailable
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


class Servicer(pb_grpc.QueueServicer):
    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.release = threading.Event()

    def EnqueueStream(self, request_iterator: Iterator[pb.EnqueueRequest], context: grpc.ServicerContext):  # type: ignore[no-untyped-def]
        for request in request_iterator:
            if self.behaviour == "cancel":
                context.abort(grpc.StatusCode.CANCELLED, "the server is stopping")
            if self.behaviour == "silent":
                self.release.wait(60)
                return
            yield pb.EnqueueResponse(jobs=[pb.Enqueued(id=i + 1) for i in range(len(request.jobs))])


@pytest.fixture
def serve():  # type: ignore[no-untyped-def]
    servers = []

    def start(behaviour: str) -> tuple[StreamedEnqueues, Servicer]:
        servicer = Servicer(behaviour)  # type: ignore[abstract]  # only EnqueueStream is served
        server = grpc.server(futures.ThreadPoolExecutor(4))
        pb_grpc.add_QueueServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append((server, servicer))
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        unary_calls: list[int] = []

        def unary(jobs: list[pb.NewJob]) -> list[pb.Enqueued]:
            unary_calls.append(len(jobs))
            return []

        return StreamedEnqueues(pb_grpc.QueueStub(channel), unary, timeout=1.0), servicer

    yield start
    for server, servicer in servers:
        servicer.release.set()
        server.stop(0)


@pytest.mark.timeout(60)
def test_a_stream_the_server_cancels_is_unavailable_and_the_next_request_opens_a_new_one(serve) -> None:  # type: ignore[no-untyped-def]
    streams, servicer = serve("cancel")
    with pytest.raises(Unavailable, match="cancelled the enqueue stream"):
        streams.send([pb.NewJob(type="t")])
    servicer.behaviour = "answer"
    assert [e.id for e in streams.send([pb.NewJob(type="t")])] == [1]
    streams.close()


@pytest.mark.timeout(60)
def test_an_answer_overdue_is_a_timeout_not_a_broken_stream(serve) -> None:  # type: ignore[no-untyped-def]
    streams, _ = serve("silent")
    with pytest.raises(PyQueueError, match=r"no answer to an enqueue within 1\.0s") as raised:
        streams.send([pb.NewJob(type="t")])
    assert not isinstance(raised.value, Unavailable)
    streams.close()
