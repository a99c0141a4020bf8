"""EnqueueStream: one enqueue per message on a stream kept open, answered in order, refusals
in-band; and the client's side of it (what single enqueues go through)."""

import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from harness import ServerProcess

import pyqueue
from pyqueue.client.enqueue_stream import StreamedEnqueues
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


def exchange(address: str, requests: list[pb.EnqueueRequest]) -> list[pb.EnqueueResponse]:
    with grpc.insecure_channel(address) as channel:
        return list(pb_grpc.QueueStub(channel).EnqueueStream(iter(requests), timeout=30))


def one(queue: str = "default") -> pb.EnqueueRequest:
    return pb.EnqueueRequest(jobs=[pb.NewJob(type="t", queue=queue, payload=b"x")])


@pytest.mark.parametrize("shards", [1, 2])
def test_answers_come_in_order_and_a_refusal_does_not_end_the_stream(tmp_path: Path, shards: int) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", str(shards)).start()
    try:
        answers = exchange(
            server.address, [one(), one("no spaces allowed"), one("mail"), pb.EnqueueRequest()]
        )
        assert [a.HasField("error") for a in answers] == [False, True, False, True]
        assert answers[1].error.code == "INVALID_ARGUMENT" and "queue" in answers[1].error.message
        assert answers[3].error.code == "INVALID_ARGUMENT"
        with pyqueue.Client(server.address) as client:
            for answer, queue_name in ((answers[0], "default"), (answers[2], "mail")):
                (enqueued,) = answer.jobs
                assert client.get_job(enqueued.id).queue == queue_name
            assert client.count_jobs() == 2, "the refused requests wrote nothing"
    finally:
        server.close()


def test_single_enqueues_go_on_the_stream_and_refusals_raise(
    client: pyqueue.Client, server: ServerProcess
) -> None:
    jobs = [client.enqueue("t", {"n": n}) for n in range(5)]
    assert [client.get_job(j.id).payload for j in jobs] == [{"n": n} for n in range(5)]
    with pytest.raises(pyqueue.InvalidArgument, match="queue"):
        client.enqueue("t", queue="no spaces allowed")
    assert client.enqueue("t").id, "the stream goes on after a refusal"
    assert client.enqueue_calls == 7


def test_a_server_restart_between_enqueues_is_not_seen(client: pyqueue.Client, server: ServerProcess) -> None:
    first = client.enqueue("t")
    server.stop()
    server.restart()
    # The old stream ended with its connection; the next enqueue opens a new one.
    assert client.enqueue("t").id != first.id


class _Silent(pb_grpc.QueueServicer):
    """A server whose EnqueueStream takes requests and never answers."""

    def __init__(self) -> None:
        self.received = threading.Event()

    def EnqueueStream(self, request_iterator: Iterator[pb.EnqueueRequest], context: grpc.ServicerContext):  # type: ignore[no-untyped-def, override]
        for _ in request_iterator:
            self.received.set()
        yield from ()


@pytest.fixture
def bare_server() -> Iterator[tuple[grpc.Server, int, _Silent]]:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    servicer = _Silent()  # type: ignore[abstract]  # grpc stubs mark every method abstract
    pb_grpc.add_QueueServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield server, port, servicer
    server.stop(0)


def test_an_answer_that_never_comes_times_out(bare_server) -> None:  # type: ignore[no-untyped-def]
    _, port, servicer = bare_server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stream = StreamedEnqueues(pb_grpc.QueueStub(channel), lambda jobs: [], timeout=0.5)
        with pytest.raises(pyqueue.PyQueueError, match=r"no answer to an enqueue within 0\.5s"):
            stream.send(list(one().jobs))
        assert servicer.received.is_set()
        stream.close()


def test_a_server_without_the_stream_gets_unary_calls(tmp_path: Path) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(2))  # no services at all: UNIMPLEMENTED
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    unary_calls: queue.SimpleQueue[int] = queue.SimpleQueue()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:

            def unary(jobs: list[pb.NewJob]) -> list[pb.Enqueued]:
                unary_calls.put(len(jobs))
                return [pb.Enqueued(id=7)]

            stream = StreamedEnqueues(pb_grpc.QueueStub(channel), unary, timeout=30)
            assert [e.id for e in stream.send(list(one().jobs))] == [7]
            assert [e.id for e in stream.send(list(one().jobs))] == [7]  # remembered: straight to unary
            assert unary_calls.qsize() == 2
            stream.close()
    finally:
        server.stop(0)


async def test_the_asyncio_client_streams_its_single_enqueues_too(server: ServerProcess) -> None:
    async with pyqueue.AsyncClient(server.address) as client:
        jobs = [await client.enqueue("t", {"n": n}) for n in range(3)]
        assert [(await client.get_job(j.id)).payload for j in jobs] == [{"n": n} for n in range(3)]
        with pytest.raises(pyqueue.InvalidArgument, match="queue"):
            await client.enqueue("t", queue="no spaces allowed")
        assert (await client.enqueue("t")).id
        server.stop()
        server.restart()
        assert (await client.enqueue("t")).id, "the stream that ended with the server is replaced"
