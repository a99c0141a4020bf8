"""The native front (server/front.py, native/src/wire/front.rs): enqueues on a port of their own,
answered as the main port answers them (the same checks, statuses and messages, writing nothing
when refused), found by the official client by itself, and left when it cannot be reached."""

import contextlib
import re
import socket
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from auth_files import write_auth_file
from harness import ServerProcess

import pyqueue
from pyqueue._native import WireChannel, WireError
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

ENQUEUE = "/pyqueue.v1.Queue/Enqueue"
ENQUEUE_STREAM = "/pyqueue.v1.Queue/EnqueueStream"
TIMEOUT = 30.0


def request(queue: str = "emails", type: str = "t") -> bytes:
    return pb.EnqueueRequest(jobs=[pb.NewJob(type=type, queue=queue, payload=b"{}")]).SerializeToString()


def front_port(address: str, metadata: tuple[tuple[str, str], ...] = ()) -> str | None:
    """The port the main port's EnqueueStream names in its first headers."""
    with grpc.insecure_channel(address) as channel:
        call = pb_grpc.QueueStub(channel).EnqueueStream(iter(()), metadata=metadata, timeout=TIMEOUT)
        port = dict(call.initial_metadata() or ()).get("pyqueue-enqueue-port")  # type: ignore[arg-type]
        return port if isinstance(port, str) else None


def front_of(server: ServerProcess, metadata: list[tuple[str, str]] | None = None) -> WireChannel:
    port = front_port(server.address, tuple(metadata or ()))
    assert port and port.isdigit(), port
    return WireChannel(f"127.0.0.1:{port}", metadata or [], 1 << 20)


def refusal(call: object) -> tuple[int, str]:
    with pytest.raises(WireError) as raised:
        call()  # type: ignore[operator]
    kind, code, message = raised.value.args
    assert kind == "status", raised.value.args
    return code, message


def front_requests(server: ServerProcess, enqueued: int) -> float:
    """The front's counter, from a /metrics drawn once `enqueued` jobs are counted (/metrics is
    drawn at most once a second: an earlier one would not hold the last requests)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        with urllib.request.urlopen(f"http://{server.http_address}/metrics", timeout=TIMEOUT) as answer:
            text = answer.read().decode()
        counted = sum(
            float(n) for n in re.findall(r"^pyqueue_jobs_enqueued_total\{[^}]*\} (\S+)$", text, re.M)
        )
        if counted >= enqueued:
            match = re.search(r"^pyqueue_native_front_requests_total (\S+)$", text, re.M)
            assert match, "the front's counter is on /metrics"
            return float(match.group(1))
        assert time.monotonic() < deadline, f"/metrics counted {counted} of {enqueued} enqueues"
        time.sleep(0.05)


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "1").start()
    yield server
    server.close()


def test_an_enqueue_on_the_front_is_written_and_answered(server: ServerProcess) -> None:
    front = front_of(server)
    answer = pb.EnqueueResponse.FromString(front.unary(ENQUEUE, request(), TIMEOUT))
    stream = front.open_stream(ENQUEUE_STREAM)
    streamed = [
        pb.EnqueueResponse.FromString(stream.exchange(request(type=f"s{i}"), TIMEOUT)) for i in range(3)
    ]
    stream.close()
    with pyqueue.Client(server.address) as client:
        assert client.get_job(answer.jobs[0].id).type == "t"
        assert [client.get_job(a.jobs[0].id).type for a in streamed] == ["s0", "s1", "s2"]
    assert front_requests(server, 4) == 4


def test_bad_input_is_refused_as_the_main_port_refuses_it_and_writes_nothing(server: ServerProcess) -> None:
    front = front_of(server)
    bad = request(queue="no spaces")
    code, message = refusal(lambda: front.unary(ENQUEUE, bad, TIMEOUT))
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as main:
        pb_grpc.QueueStub(channel).Enqueue(pb.EnqueueRequest.FromString(bad), timeout=TIMEOUT)
    assert (code, message) == (main.value.code().value[0], main.value.details())
    assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "queue" in message
    # On a stream, an engine's refusal is answered in-band and the stream goes on.
    stream = front.open_stream(ENQUEUE_STREAM)
    answer = pb.EnqueueResponse.FromString(stream.exchange(bad, TIMEOUT))
    assert answer.error.code == "INVALID_ARGUMENT" and answer.error.message == message
    assert pb.EnqueueResponse.FromString(stream.exchange(request(), TIMEOUT)).jobs
    stream.close()
    code, message = refusal(lambda: front.unary(ENQUEUE, b"\xff\xff not protobuf", TIMEOUT))
    assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "not a valid EnqueueRequest" in message
    code, message = refusal(lambda: front.unary("/pyqueue.v1.Queue/GetJob", b"", TIMEOUT))
    assert code == grpc.StatusCode.UNIMPLEMENTED.value[0] and "main port" in message
    with pyqueue.Client(server.address) as client:
        assert client.count_jobs() == 1, "only the good request wrote"


def test_an_oversized_request_is_resource_exhausted(server: ServerProcess) -> None:
    front = front_of(server)
    big = pb.EnqueueRequest(jobs=[pb.NewJob(type="t", payload=b"x" * (64 << 20))]).SerializeToString()
    code, message = refusal(lambda: front.unary(ENQUEUE, big, TIMEOUT))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0] and f"limit of {64 << 20} bytes" in message
    with pyqueue.Client(server.address) as client:
        assert client.count_jobs() == 0


def test_tokens_and_rights_hold_on_the_front(tmp_path: Path) -> None:
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data", "--shards", "1", "--auth-file", str(tmp_path / "auth.toml")
    ).start()
    try:
        producer = [("authorization", f"Bearer {secrets['producer']}")]
        front = front_of(server, producer)
        assert pb.EnqueueResponse.FromString(front.unary(ENQUEUE, request("emails"), TIMEOUT)).jobs
        code, message = refusal(lambda: front.unary(ENQUEUE, request("reports"), TIMEOUT))
        assert code == grpc.StatusCode.PERMISSION_DENIED.value[0] and "produce" in message
        stream = front.open_stream(ENQUEUE_STREAM)
        code, _ = refusal(lambda: stream.exchange(request("reports"), TIMEOUT))
        assert code == grpc.StatusCode.PERMISSION_DENIED.value[0], "a refused right ends the stream"
        port = front_port(server.address, tuple(producer))
        for metadata in (
            [],
            [("authorization", "Bearer not-a-token")],
            [("authorization", f"Bearer {secrets['worker']}")],
        ):
            other = WireChannel(f"127.0.0.1:{port}", metadata, 1 << 20)
            code, _ = refusal(lambda: other.unary(ENQUEUE, request("emails"), TIMEOUT))  # noqa: B023
            assert code in (
                grpc.StatusCode.UNAUTHENTICATED.value[0],
                grpc.StatusCode.PERMISSION_DENIED.value[0],
            )
        with pyqueue.Client(server.address, token=secrets["root"]) as client:
            assert client.count_jobs() == 1, "nothing refused was written"
    finally:
        server.close()


def test_the_client_moves_to_the_front_and_follows_a_restart(server: ServerProcess) -> None:
    with pyqueue.Client(server.address) as client:
        first = [client.enqueue("t", {"n": n}) for n in range(5)]
        assert front_requests(server, 5) >= 4, "after the first answer, single enqueues go native"
        before = front_port(server.address)
        server.stop()
        server.restart()
        assert front_port(server.address) != before or before is None
        after = client.enqueue("t", {"n": 5})  # the old front is gone: the main port, then the new front
        again = [client.enqueue("t", {"n": n}) for n in range(6, 9)]
        assert front_requests(server, 4) >= 3, "the client found the new front"
        jobs = [*first, after, *again]
        assert [client.get_job(j.id).payload for j in jobs] == [{"n": n} for n in range(9)]


def test_without_the_front_nothing_names_it_and_enqueues_go_by_grpc(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "1", "--no-native-front").start()
    try:
        assert front_port(server.address) is None
        with pyqueue.Client(server.address) as client:
            assert client.enqueue("t").id
        assert front_requests(server, 1) == 0
    finally:
        server.close()


class Forwarder:
    """A TCP forwarder on 127.0.0.2 to one port on 127.0.0.1: a client that dials it is told a
    front on 127.0.0.2, where nothing listens (as a firewall that lets only the main port in)."""

    def __init__(self, target: int) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.2", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self._listener.accept()
            except OSError:
                return
            outbound = socket.create_connection(("127.0.0.1", self._target))
            for a, b in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._listener.close()


def test_a_front_out_of_reach_is_left_for_the_main_port(server: ServerProcess) -> None:
    forwarder = Forwarder(int(server.address.rsplit(":", 1)[1]))
    try:
        with pyqueue.Client(f"127.0.0.2:{forwarder.port}") as client:
            jobs = [client.enqueue("t", {"n": n}) for n in range(5)]
            assert [client.get_job(j.id).payload for j in jobs] == [{"n": n} for n in range(5)]
        assert front_requests(server, 5) == 0, "every enqueue went by the main port"
    finally:
        forwarder.close()


def test_every_enqueue_the_front_answered_survives_a_sigkill(server: ServerProcess) -> None:
    """Eight producers on the front, the server SIGKILLed under them: every id answered is there
    after the restart (an answer comes after the fsync, whichever port took the request)."""
    answered: list[int] = []
    lock = threading.Lock()
    enough = threading.Event()

    def produce() -> None:
        with (
            pyqueue.Client(server.address, failover_s=0) as client,
            contextlib.suppress(pyqueue.PyQueueError),
        ):
            while True:
                job = client.enqueue("t", {"n": 1})
                with lock:
                    answered.append(job.id)
                    if len(answered) >= 400:
                        enough.set()

    producers = [threading.Thread(target=produce, daemon=True) for _ in range(8)]
    for p in producers:
        p.start()
    assert enough.wait(TIMEOUT), "the producers made their first 400 enqueues"
    assert front_requests(server, 400) > 0, "the producers are on the front"
    server.kill()
    for p in producers:
        p.join(TIMEOUT)
        assert not p.is_alive(), "a producer saw the kill"
    server.restart()
    with pyqueue.Client(server.address) as client:
        with lock:
            ids = list(answered)
        missing = [i for i in ids if not _exists(client, i)]
        assert not missing, f"{len(missing)} of {len(ids)} answered enqueues were lost"


def _exists(client: pyqueue.Client, job_id: int) -> bool:
    try:
        client.get_job(job_id)
    except pyqueue.NotFound:
        return False
    return True


def test_a_restart_under_producers_on_the_front_loses_and_doubles_nothing(server: ServerProcess) -> None:
    """SIGTERM with four producers on the front, and a start again: the front answers what it
    took, refuses the rest unread, and each producer's client sends it again (failover)."""
    answered: list[int] = []
    lock = threading.Lock()
    counts = threading.Semaphore(0)
    stop = threading.Event()

    def produce() -> None:
        with pyqueue.Client(server.address) as client:
            while not stop.is_set():
                job = client.enqueue("t", {"n": 1})
                with lock:
                    answered.append(job.id)
                counts.release()

    producers = [threading.Thread(target=produce, daemon=True) for _ in range(4)]
    for p in producers:
        p.start()
    for _ in range(200):
        assert counts.acquire(timeout=TIMEOUT)
    server.stop()
    server.restart()
    for _ in range(200):  # after the restart, on the new front
        assert counts.acquire(timeout=TIMEOUT)
    stop.set()
    for p in producers:
        p.join(TIMEOUT)
        assert not p.is_alive()
    with pyqueue.Client(server.address) as client:
        assert len(set(answered)) == len(answered)
        assert client.count_jobs() == len(answered), "every answered enqueue is there, once"
