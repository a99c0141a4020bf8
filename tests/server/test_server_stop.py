"""A server that stops tells its workers: a job they had prefetched is not started there any more
(it goes back with no attempt), and the answer of a job they had started is still taken. Clients
that hold a connection and say nothing do not hold the stop."""

import socket
import threading
import time

import pytest
from harness import ServerProcess

import pyqueue


def test_a_stopping_server_takes_started_answers_and_keeps_prefetched_jobs_unstarted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            running = client.enqueue("t", b"a", keep_completed=600)
            prefetched = client.enqueue("t", b"b")
            with client.take("default", prefetch=2) as stream:
                job = stream.next(timeout=30, confirm_start=True)
                assert job is not None and job.id == running.id
                exit_code: list[int] = []
                stopper = threading.Thread(target=lambda: exit_code.append(server.stop(timeout=60)))
                stopper.start()
                stopped = threading.Event()
                while not stream.server_stopping and not stopped.wait(0.01):
                    assert stopper.is_alive(), "the server ended without telling the stream"
                job.ack()  # the started job's answer is still taken (committed before it returns)
                assert stream.next(timeout=30) is None, "a prefetched job was started after Stopping"
                stopper.join(timeout=60)
                assert exit_code == [0]
        server.restart()
        with pyqueue.Client(server.address) as client:
            assert client.get_job(running.id).status == "completed"
            again = client.get_job(prefetched.id)
            assert (again.status, again.attempts, again.lost) == ("ready", 0, 0)
    finally:
        server.close()


def silent_http2_client(address: str) -> socket.socket:
    """A connection that completes HTTP/2's handshake, then never reads again: a client process
    that is not polling its channel (an idle sync client between requests) never answers the
    server's goodbye."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    buffer = b""
    while True:  # up to the server's SETTINGS frame, sent once it took the connection in
        while len(buffer) < 9 or len(buffer) < 9 + int.from_bytes(buffer[:3], "big"):
            buffer += sock.recv(4096)
        kind, flags = buffer[3], buffer[4]
        buffer = buffer[9 + int.from_bytes(buffer[:3], "big") :]
        if kind == 4 and not flags & 1:
            sock.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")  # its SETTINGS acknowledged
            return sock


@pytest.mark.parametrize("shards", [1, 2])
def test_clients_that_say_nothing_do_not_hold_the_stop(tmp_path, shards: int) -> None:  # type: ignore[no-untyped-def]
    # grpc's graceful stop waits for every connection to answer its goodbye; these never do, and
    # the server (and, sharded, the router too) waited out its whole grace period of 10 s.
    server = ServerProcess(tmp_path / "data", "--shards", str(shards)).start()
    silent = []
    try:
        with pyqueue.Client(server.address) as client:
            job = client.enqueue("t", b"kept")  # an everyday client too, idle when the stop comes
            silent = [silent_http2_client(server.address) for _ in range(8)]
            began = time.monotonic()
            assert server.stop(timeout=60) == 0
            took = time.monotonic() - began
            assert took < 5.0, f"the stop took {took:.1f}s: it waited on idle connections"
        server.restart()
        with pyqueue.Client(server.address) as client:
            assert client.get_job(job.id).status == "ready"
    finally:
        for sock in silent:
            sock.close()
        server.close()
