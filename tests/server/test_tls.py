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
    # A refusal is not a failover: no 30 s of sending again (the default budget) before it is raised.
    client = pyqueue.Client(address, timeout=5, failover_s=0.5, **security)  # type: ignore[arg-type]
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


@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("mode", ["tls", "mtls", "tls+tokens"])
def test_the_http_api_and_the_dashboard_work_behind_tls(tmp_path, pki, shards: int, mode: str) -> None:  # type: ignore[no-untyped-def]
    """The HTTP port's own client reaches the gRPC service through the internal plaintext port; with
    shards it must not dial their public (TLS) addresses in plaintext (it did: 503 and 502)."""
    import json

    from auth_files import write_auth_file

    ours, _, pair = pki
    clients = Authority(tmp_path, "clients")
    mine = clients.issue("caller", server=False)
    args = ["--shards", str(shards), "--tls-cert", str(pair.cert), "--tls-key", str(pair.key)]
    headers = {"Content-Type": "application/json", "X-Pyqueue-Action": "1"}
    if mode == "mtls":
        args += ["--tls-client-ca", str(clients.path)]
    if mode == "tls+tokens":
        secrets = write_auth_file(tmp_path / "auth.toml")
        args += ["--auth-file", str(tmp_path / "auth.toml")]
        headers["Authorization"] = f"Bearer {secrets['root']}"
    server = ServerProcess(tmp_path / "data", *args).start()
    https = ssl.create_default_context(cafile=str(ours.path))
    if mode == "mtls":
        https.load_cert_chain(str(mine.cert), str(mine.key))

    def call(method: str, path: str, body: object = None) -> dict:  # type: ignore[type-arg]
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"https://{server.http_address}{path}", data=data, method=method, headers=headers
        )
        with urllib.request.urlopen(request, context=https, timeout=30) as answer:
            assert answer.status == 200
            return json.loads(answer.read())  # type: ignore[no-any-return]

    try:
        ids = []
        for queue in ("q", "other", "third"):  # with shards, queues on both of them
            made = call("POST", "/v1/jobs", {"type": "t", "queue": queue, "payload": {"n": 1}})
            assert call("GET", f"/v1/jobs/{made['id']}")["queue"] == queue
            ids.append(made["id"])
        assert {j["id"] for j in call("GET", "/api/jobs")["jobs"]} == set(ids)
        assert call("GET", f"/api/jobs/{ids[0]}")["payload"] == {"n": 1}
        assert call("POST", f"/api/jobs/{ids[1]}/delete", {})["done"] == "delete"
    finally:
        server.close()


def test_a_client_given_several_addresses_checks_the_certificate_against_the_first_host(
    tmp_path, pki
) -> None:  # type: ignore[no-untyped-def]
    ours, _, pair = pki
    server = ServerProcess(
        tmp_path / "data", "--tls-cert", str(pair.cert), "--tls-key", str(pair.key)
    ).start()
    try:
        port = server.address.rsplit(":", 1)[1]
        # A cluster's nodes, as a client is given them; gRPC alone checked the certificate
        # against the whole list ("Hostname Verification Check failed").
        with pyqueue.Client(f"127.0.0.1:{port},localhost:{port}", ca=ours.path, timeout=30) as client:
            _round_trip(client)
    finally:
        server.close()
