"""A real network: a 2-shard server in one network namespace and a worker in another, joined by a
veth pair the test makes (two hosts on a private link, nothing beyond it). The worker knows only
the server's public address; the topology must hand it addresses it can dial (the shards listen on
the listen host, and are advertised by it), over TLS and with a token, as a deployment runs.

Also: serving beyond loopback without TLS or tokens is refused unless --insecure, and --advertise
is what the topology says. Needs root and iproute2 (as in CI)."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from auth_files import write_auth_file
from certs import Authority
from grpc_health.v1 import health_pb2, health_pb2_grpc
from harness import ProcessOutput, ServerProcess, serve_once

import pyqueue

SERVER_IP, WORKER_IP = "10.231.0.1", "10.231.0.2"
WORKER = textwrap.dedent("""
    import sys, pyqueue
    with pyqueue.Client(sys.argv[1]) as client:
        queues = sys.argv[2:]
        ids = {client.enqueue("t", queue=q).id for q in queues}
        print("shards", sorted({a.rsplit(":", 1)[0] for a in client.topology().addresses}), flush=True)
        with client.take(queues, prefetch=10) as stream:
            while ids:
                job = stream.next(timeout=30)
                ids.discard(job.id)
                job.ack()
    print("done", flush=True)
""")

needs_netns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2 for network namespaces"
)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str]]:
    tag = str(os.getpid() % 100_000)
    server_ns, worker_ns = f"pqs{tag}", f"pqw{tag}"
    _ip("netns", "add", server_ns)
    _ip("netns", "add", worker_ns)
    try:
        _ip("link", "add", f"pqa{tag}", "type", "veth", "peer", "name", f"pqb{tag}")
        _ip("link", "set", f"pqa{tag}", "netns", server_ns)
        _ip("link", "set", f"pqb{tag}", "netns", worker_ns)
        for ns, dev, ip in ((server_ns, f"pqa{tag}", SERVER_IP), (worker_ns, f"pqb{tag}", WORKER_IP)):
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield server_ns, worker_ns
    finally:
        for ns in (server_ns, worker_ns):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=30)


def _queues_on_both_shards() -> list[str]:
    from pyqueue.cluster import Topology

    topology = Topology(("a", "b"))
    names = [f"q{i}" for i in range(20)]
    return [next(q for q in names if topology.shard_of_queue(q) == shard) for shard in (0, 1)]


@needs_netns
def test_a_worker_on_another_host_reaches_a_sharded_server_by_its_address(tmp_path: Path, two_hosts) -> None:  # type: ignore[no-untyped-def]
    server_ns, worker_ns = two_hosts
    ca = Authority(tmp_path, "ours")
    pair = ca.issue("server", server=True, hosts=("127.0.0.1", SERVER_IP))
    secrets = write_auth_file(tmp_path / "auth.toml")
    serve = [
        "ip", "netns", "exec", server_ns, sys.executable, "-m", "pyqueue", "serve",
        "--data-dir", str(tmp_path / "data"), "--listen", f"{SERVER_IP}:0", "--shards", "2",
        "--http-listen", "", "--tls-cert", str(pair.cert), "--tls-key", str(pair.key),
        "--auth-file", str(tmp_path / "auth.toml"),
    ]  # fmt: skip
    server = subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = ProcessOutput(server)
        line = output.wait_lines("supervisor: pyqueue listening on", timeout=60)[0]
        address = re.search(r"listening on (\S+:\d+)", line).group(1)  # type: ignore[union-attr]
        assert address.startswith(SERVER_IP)
        env = {**os.environ, "PYQUEUE_TOKEN": secrets["root"], "PYQUEUE_TLS_CA": str(ca.path)}
        worker = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                worker_ns,
                sys.executable,
                "-c",
                WORKER,
                address,
                *_queues_on_both_shards(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert worker.returncode == 0, worker.stderr
        assert f"shards ['{SERVER_IP}']" in worker.stdout and "done" in worker.stdout, worker.stdout
    finally:
        server.terminate()
        server.wait(60)


def test_advertise_is_what_the_topology_says(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "2", "--advertise", "localhost").start()
    try:
        with grpc.insecure_channel(server.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", "pyqueue.v1.Queue"):
                answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
        with pyqueue.Client(server.address) as client:
            assert client.topology() is not None
            addresses = client.topology().addresses
            assert len(addresses) == 2 and all(a.startswith("localhost:") for a in addresses)
            for queue in _queues_on_both_shards():  # and the advertised name is dialed
                client.enqueue("t", queue=queue)
            assert client.count_jobs(queues=_queues_on_both_shards()) == 2
    finally:
        server.close()


def test_serving_beyond_loopback_without_tls_or_tokens_is_refused(tmp_path: Path) -> None:
    refused = serve_once(tmp_path / "data", "--listen", "0.0.0.0:0", "--shards", "1")
    assert refused.returncode != 0
    assert "--tls-cert and --tls-key and --auth-file" in refused.stderr and "--insecure" in refused.stderr
    tokens = tmp_path / "auth.toml"
    write_auth_file(tokens)
    refused = serve_once(
        tmp_path / "data", "--listen", "0.0.0.0:0", "--shards", "1", "--auth-file", str(tokens)
    )
    assert refused.returncode != 0 and "without --tls-cert and --tls-key" in refused.stderr
    assert not (tmp_path / "data").exists(), "nothing was created"
