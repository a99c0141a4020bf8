"""The official client's single enqueues over the native transport (pyqueue._native's
WireChannel), against a real server: the same answers, the same typed refusals with the same
messages, tokens, a restart in between, and grpcio when asked for or when TLS is on."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from auth_files import write_auth_file
from harness import ServerProcess

import pyqueue
from pyqueue.client.enqueue_stream import StreamedEnqueues
from pyqueue.client.native_wire import NativeEnqueues, usable


@pytest.fixture(params=[1, 2], ids=["one-process", "two-shards"])
def server(request, tmp_path: Path) -> Iterator[ServerProcess]:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", str(request.param)).start()
    yield server
    server.close()


def transports(client: pyqueue.Client) -> set[type]:
    return {type(s) for s in client._streams.values()}


@pytest.mark.timeout(120)
def test_single_enqueues_go_native_and_are_answered_as_over_grpcio(server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with pyqueue.Client(server.address, batching=True) as native:
        jobs = [native.enqueue("t", {"n": n}, queue=f"q{n % 3}") for n in range(30)]
        assert transports(native) == {NativeEnqueues}
        assert [native.get_job(j.id).payload for j in jobs] == [{"n": n} for n in range(30)]
        again = native.enqueue("t", 1, queue="q0", unique_key="k")
        assert native.enqueue("t", 2, queue="q0", unique_key="k").id == again.id
        with pytest.raises(pyqueue.InvalidArgument) as native_refusal:
            native.enqueue("t", 1, queue="a\0b")
    monkeypatch.setenv("PYQUEUE_TRANSPORT", "grpc")
    with pyqueue.Client(server.address) as grpcio:
        grpcio.enqueue("t", 1, queue="q1")
        assert transports(grpcio) == {StreamedEnqueues}
        with pytest.raises(pyqueue.InvalidArgument) as grpc_refusal:
            grpcio.enqueue("t", 1, queue="a\0b")
    assert str(native_refusal.value) == str(grpc_refusal.value)


@pytest.mark.timeout(120)
def test_a_restart_between_enqueues_is_crossed_and_a_server_gone_is_unavailable(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address, failover_s=60) as client:
            first = client.enqueue("t", 1, unique_key="a")
            server.kill()
            server.restart()
            second = client.enqueue("t", 2, unique_key="b")  # the stream died with the server
            assert {client.get_job(first.id).payload, client.get_job(second.id).payload} == {1, 2}
            server.kill()
        with pyqueue.Client(server.address, failover_s=0.5) as client, pytest.raises(pyqueue.Unavailable):
            client.enqueue("t", 3)
    finally:
        server.close()


@pytest.mark.timeout(120)
def test_tokens_go_with_native_calls(tmp_path: Path) -> None:
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(tmp_path / "data", "--auth-file", str(tmp_path / "auth.toml")).start()
    try:
        with pyqueue.Client(server.address, token=secrets["producer"]) as producer:
            assert producer.enqueue("t", 1, queue="emails").id
            assert transports(producer) == {NativeEnqueues}
            with pytest.raises(pyqueue.PermissionDenied):
                producer.enqueue("t", 1, queue="other")
        with (
            pyqueue.Client(server.address, token="not-a-token") as stranger,
            pytest.raises(pyqueue.Unauthenticated),
        ):
            stranger.enqueue("t", 1, queue="emails")
    finally:
        server.close()


def test_tls_several_nodes_and_the_switch_keep_grpcio(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert usable("127.0.0.1:7411", tls=False)
    assert not usable("127.0.0.1:7411", tls=True)
    assert not usable("h1:7411,h2:7411", tls=False)
    monkeypatch.setenv("PYQUEUE_TRANSPORT", "grpc")
    assert not usable("127.0.0.1:7411", tls=False)


@pytest.mark.timeout(120)
def test_a_forked_child_calls_natively_on_its_own_runtime(tmp_path: Path) -> None:
    """A child forked after the parent's calls (Celery's prefork pool) inherits a runtime without
    its thread: it must start its own, and the parent must go on with its own."""
    import os
    import signal
    import time

    from pyqueue._native import WireChannel
    from pyqueue.v1 import queue_pb2 as pb

    server = ServerProcess(tmp_path / "data").start()
    request = pb.EnqueueRequest(jobs=[pb.NewJob(type="t")]).SerializeToString()
    try:
        parent = WireChannel(server.address, [], 1 << 20)
        parent.unary("/pyqueue.v1.Queue/Enqueue", request, 10)
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 once its own call was answered
            code = 1
            try:
                WireChannel(server.address, [], 1 << 20).unary("/pyqueue.v1.Queue/Enqueue", request, 10)
                code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + 60
        while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if ended[0] == 0:  # hung on the parent's runtime: never leave it behind
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        assert ended[0] == pid and os.waitstatus_to_exitcode(ended[1]) == 0, "the child's call hung or failed"
        parent.unary("/pyqueue.v1.Queue/Enqueue", request, 10)
        with pyqueue.Client(server.address) as client:
            assert client.count_jobs() == 3
    finally:
        server.close()
