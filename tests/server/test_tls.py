"""TLS and mTLS with certificates made in the test: a server with --tls-cert serves TLS only; with
--tls-client-ca it also requires a client certificate from that CA. A client that trusts another
CA, speaks plaintext, or shows a certificate from a foreign CA gets nowhere and changes nothing.
With shards, the shards serve TLS too (clients dial them directly), and the HTTP port serves HTTPS."""

import ssl
import urllib.request
from pathlib import Path

import pytest
from certs import Authority, Pair
from harness import ServerProcess

import pyqueue


@pytest.fixture
def pki(tmp_path: Path) -> tuple[Authority, Authority, Pair]:
    ours, foreign = Authority(tmp_path, "ours"), Authority(tmp_path, "foreign")
    return ours, foreign, ours.issue("server", server=True)


def _refused(address: str, **security: object) -> None:
    client = pyqueue.Client(address, timeout=5, **security)  # type: ignore[arg-type]
    try:
        with pytest.raises(pyqueue.PyQueueError):
            client.enqueue("t", queue="q")
    finally:
        client.close()


def _round_trip(client: pyqueue.Client, queue: str = "q") -> None:
    job = client.enqueue("t", b"x", queue=queue)
    with client.take(queue) as stream:
        got = stream.next(timeout=30)
        assert got is not None and got.id == job.id
        got.ack()


@pytest.mark.parametrize("shards", [1, 2])
def test_tls_serves_tls_only_and_a_client_must_trust_its_ca(tmp_path, pki, shards: int) -> None:  # type: ignore[no-untyped-def]
    ours, foreign, pair = pki
    server = ServerProcess(
        tmp_path / "data", "--shards", str(shards), "--tls-cert", str(pair.cert), "--tls-key", str(pair.key)
    ).start()
    try:
        with pyqueue.Client(server.address, ca=ours.path) as client:
            for queue in ("q", "other", "third"):  # with shards, queues on both of them
                _round_trip(client, queue)
        _refused(server.address, tls=False)
        _refused(server.address, ca=foreign.path)
        with pyqueue.Client(server.address, ca=ours.path) as client:
            assert client.count_jobs(statuses=["ready"]) == 0, "the refused calls added nothing"
        # The HTTP port serves HTTPS with the same certificate.
        https = ssl.create_default_context(cafile=str(ours.path))
        with urllib.request.urlopen(f"https://{server.http_address}/healthz", context=https, timeout=10) as r:
            assert r.read() == b"ok\n"
    finally:
        server.close()


def test_mtls_requires_a_client_certificate_from_the_client_ca(tmp_path, pki) -> None:  # type: ignore[no-untyped-def]
    ours, foreign, pair = pki
    clients = Authority(tmp_path, "clients")
    good, stranger = clients.issue("worker", server=False), foreign.issue("stranger", server=False)
    server = ServerProcess(
        tmp_path / "data",
        "--tls-cert",
        str(pair.cert),
        "--tls-key",
        str(pair.key),
        "--tls-client-ca",
        str(clients.path),
    ).start()
    try:
        with pyqueue.Client(server.address, ca=ours.path, cert=good.cert, key=good.key) as client:
            _round_trip(client)
        _refused(server.address, ca=ours.path)  # no client certificate
        _refused(server.address, ca=ours.path, cert=stranger.cert, key=stranger.key)
    finally:
        server.close()


def test_the_environment_configures_the_client(tmp_path, pki, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    ours, _, pair = pki
    server = ServerProcess(
        tmp_path / "data", "--tls-cert", str(pair.cert), "--tls-key", str(pair.key)
    ).start()
    try:
        monkeypatch.setenv("PYQUEUE_TLS_CA", str(ours.path))
        with pyqueue.Client(server.address) as client:
            _round_trip(client)
    finally:
        server.close()
