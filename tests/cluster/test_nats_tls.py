"""A NATS server that requires TLS and client certificates (verify: true): a node reaches it
trusting --cluster-ca and showing its own --tls-cert, and `pyqueue cluster` does the same with the
same flags; without a certificate it gets a clear error, never a hang."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import Authority, Pair
from harness import ProcessOutput, ServerProcess, pyqueue_command
from nats_servers import free_ports, nats_server_binary

import pyqueue


@pytest.fixture
def tls_nats(tmp_path: Path) -> Iterator[tuple[str, Authority]]:
    ca = Authority(tmp_path, "ours")
    pair = ca.issue("nats", server=True)
    (port,) = free_ports(1)
    config = tmp_path / "nats.conf"
    config.write_text(
        f"listen: 127.0.0.1:{port}\njetstream {{ store_dir: {tmp_path / 'js'} }}\n"
        f'tls {{ cert_file: "{pair.cert}", key_file: "{pair.key}", ca_file: "{ca.path}", verify: true }}\n'
    )
    proc = subprocess.Popen(
        [nats_server_binary(), "-c", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        ProcessOutput(proc).wait_lines("Server is ready", timeout=60)
        yield f"tls://127.0.0.1:{port}", ca
    finally:
        proc.kill()
        proc.wait(30)


def _flags(ca: Authority, node: Pair | None) -> list[str]:
    shown = ["--tls-cert", str(node.cert), "--tls-key", str(node.key)] if node else []
    return ["--cluster-ca", str(ca.path), *shown]


def test_a_node_and_the_cli_reach_a_nats_that_requires_client_certificates(
    tmp_path: Path, tls_nats: tuple[str, Authority]
) -> None:
    url, ca = tls_nats
    node = ca.issue("node", server=True, client=True)
    joined = ["--cluster", url, "--cluster-name", "tls", "--node", "a", "--replicas", "1", "--lease", "2"]
    server = ServerProcess(tmp_path / "node", "--shards", "2", *joined, *_flags(ca, node)).start(timeout=90)
    try:
        with pyqueue.Client(server.address, ca=ca.path, timeout=30) as client:
            job = client.enqueue("t", b"x", queue="q")  # on the changelog in NATS before it answers
            with client.take("q") as stream:
                got = stream.next(timeout=30)
                assert got is not None and got.id == job.id
                got.ack()

        cli = ["cluster", "status", "--cluster", url, "--cluster-name", "tls", "--json"]
        done = pyqueue_command(*cli, *_flags(ca, node), timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        status = json.loads(done.stdout)
        assert [s["owner"] for s in status["shard_status"]] == ["a", "a"]
        assert sum(s["changelog_end"] for s in status["shard_status"]) >= 2, "the job's entries"

        refused = pyqueue_command(*cli, *_flags(ca, None), timeout=60)  # no certificate to show
        assert refused.returncode != 0
        assert f"no NATS server answered at {url}" in refused.stderr, refused.stderr
        assert "with TLS --cluster-ca and --tls-cert" in refused.stderr

        assert server.stop() == 0
        noise = [line for line in server.lines if "WARNING" in line or "ERROR" in line or "Traceback" in line]
        assert noise == [], "a clean stop logs no warning (asyncio warned of every TLS close)"
    finally:
        server.close()
