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
