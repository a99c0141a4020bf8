"""What one HTTP client may cost the server is bounded: bodies are capped before they are read
(a negative or huge Content-Length too), parsed job by job up to the job limit, and must arrive
within the read timeout; connections past --max-http-connections are closed as they come, and a
silent one is closed after the read timeout, so descriptors and threads stay bounded."""

import json
import os
import socket
import time
from pathlib import Path

import pytest
from harness import ServerProcess

import pyqueue
from pyqueue.server.http_limits import HttpLimits


def _request(http: str, head: str, body: bytes = b"", timeout: float = 30) -> tuple[int, dict]:  # type: ignore[type-arg]
    host, port = http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1] or b"{}")


def _post(length: int | str) -> str:
    return (
        "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n"
    )


@pytest.fixture
def bounded(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = ServerProcess(
        tmp_path / "data",
        "--max-http-connections", "8", "--http-read-timeout", "2", "--max-http-body-bytes", "100000",
    ).start()  # fmt: skip
    yield server
    server.close()


def test_bodies_are_bounded_before_and_while_they_are_read(bounded: ServerProcess) -> None:
    http = bounded.http_address
    started = time.monotonic()
    status, answer = _request(http, _post(-1))
    assert (status, answer["code"]) == (400, "INVALID_ARGUMENT") and "negative" in answer["error"]
    # Answered after the refusal pause: a client sending refused bodies back to back is paced.
    assert time.monotonic() - started >= HttpLimits().refusal_pause_s
    started = time.monotonic()
    status, answer = _request(http, _post(100 << 20))  # claims 100 MiB, sends nothing
    assert (status, answer["code"]) == (413, "RESOURCE_EXHAUSTED") and "--max-http-body-bytes" in answer[
        "error"
    ]
    assert time.monotonic() - started < 2, "refused before waiting for a byte of it"
    many = json.dumps([{"type": "t"}] * 5000).encode()  # under the byte limit, over the job limit
    status, answer = _request(http, _post(len(many)), many)
    assert status == 413 and "--max-jobs-per-enqueue" in answer["error"]
    status, answer = _request(http, _post(1000), b'[{"type": "t"}')  # then nothing: a trickle
    assert status == 400 and ("did not arrive" in answer["error"] or "ended after" in answer["error"])
    with pyqueue.Client(bounded.address) as client:
        assert client.count_jobs() == 0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_connections_past_the_cap_are_closed_and_silent_ones_time_out(bounded: ServerProcess) -> None:
    assert bounded.proc is not None
    host, port = bounded.http_address.rsplit(":", 1)
    before = _fds(bounded.proc.pid)
    silent = [socket.create_connection((host, int(port)), timeout=30) for _ in range(300)]
    try:
        with pyqueue.Client(bounded.address) as client:  # the gRPC port and the store go on
            client.enqueue_many([{"type": "t"}] * 100)
            assert client.count_jobs() == 100
        assert _fds(bounded.proc.pid) <= before + 8 + 16, "the server holds at most the cap"
        closed = 0
        for sock in silent:
            if sock.recv(1) == b"":  # closed by the server: past the cap at once, the rest at the timeout
                closed += 1
        assert closed == len(silent)
    finally:
        for sock in silent:
            sock.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            status, _ = _request(
                bounded.http_address, "GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            )
            break
        except (OSError, IndexError):
            time.sleep(0.1)
    assert status == 200, "once the silent ones are gone, the port serves"
