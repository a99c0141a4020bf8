"""A cluster whose nodes serve TLS, require client certificates (mTLS) and tokens: a node forwards
what it does not own to the other nodes over TLS, checking their certificates against --cluster-ca
and showing its own, with the caller's token, whose rights the owner checks; clients see one
cluster, and a client without a certificate gets nowhere."""

from pathlib import Path

import grpc
import pytest
from auth_files import write_auth_file
from certs import Authority
from cluster_nodes import Cluster, wait_until
from harness import queue_on
from nats_servers import NatsCluster

import pyqueue
from pyqueue.cluster import Topology
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


def test_nodes_forward_to_each_other_over_mtls_with_the_callers_token(
    tmp_path: Path, nats: NatsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = Authority(tmp_path, "ours")
    node = ca.issue("node", server=True, client=True)  # serves, and dials the other nodes
    user = ca.issue("user", server=False)
    for name, path in (
        ("PYQUEUE_TLS_CA", ca.path),
        ("PYQUEUE_TLS_CERT", user.cert),
        ("PYQUEUE_TLS_KEY", user.key),
    ):
        monkeypatch.setenv(name, str(path))  # the clients of the test and of cluster_nodes
    tokens = write_auth_file(tmp_path / "auth.toml")
    monkeypatch.setenv("PYQUEUE_TOKEN", tokens["root"])
    tls = ("--tls-cert", str(node.cert), "--tls-key", str(node.key), "--tls-client-ca", str(ca.path))
    auth = ("--auth-file", str(tmp_path / "auth.toml"))
    cluster = Cluster(tmp_path, nats, 2, 2.0, *tls, "--cluster-ca", str(ca.path), *auth).start()
    try:
        wait_until(lambda: cluster.owner(0) is not cluster.owner(1), 60, "the shards are balanced")
        owners = {cluster.owner(0), cluster.owner(1)}
        (idle,) = (n for n in cluster.nodes if n not in owners)  # 3 nodes, 2 shards: it owns none

        # Through the node that owns nothing, as a plain gRPC client sees it (no routing of its
        # own): every call is forwarded to another node's owner, over mTLS.
        credentials = grpc.ssl_channel_credentials(
            ca.path.read_bytes(), user.key.read_bytes(), user.cert.read_bytes()
        )
        with grpc.secure_channel(idle.address, credentials) as channel:
            stub = pb_grpc.QueueStub(channel)
            root = (("authorization", f"Bearer {tokens['root']}"),)
            topology = Topology.from_pb(stub.GetTopology(pb.TopologyRequest(), timeout=30, metadata=root))
            queues = [queue_on(topology, 0), queue_on(topology, 1)]
            jobs = [pb.NewJob(type="t", queue=q) for q in queues]
            ids = [e.id for e in stub.Enqueue(pb.EnqueueRequest(jobs=jobs), timeout=30, metadata=root).jobs]
            got = [stub.GetJob(pb.GetJobRequest(id=i), timeout=30, metadata=root).queue for i in ids]
            assert got == queues
            # The owner checks the forwarded token's rights: a reader may not enqueue.
            reader = (("authorization", f"Bearer {tokens['reader']}"),)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Enqueue(
                    pb.EnqueueRequest(jobs=[pb.NewJob(type="t", queue="emails")]), timeout=30, metadata=reader
                )
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, refused.value.details()

        # The official client, given only that node: it learns the owners and dials them itself.
        with pyqueue.Client(idle.address, timeout=30) as client:
            assert client.count_jobs() == 2
            for queue in queues:
                with client.take(queue) as stream:
                    job = stream.next(timeout=30)
                    assert job is not None and job.id in ids
                    job.ack()
            wait_until(lambda: client.count_jobs(statuses=["ready", "in_flight"]) == 0, 30, "both acked")

        # A client without a certificate is refused by the node, which forwards nothing for it.
        monkeypatch.delenv("PYQUEUE_TLS_CERT")
        monkeypatch.delenv("PYQUEUE_TLS_KEY")
        with (
            pyqueue.Client(idle.address, timeout=10, ca=ca.path) as bare,
            pytest.raises(pyqueue.PyQueueError),
        ):
            bare.count_jobs()
    finally:
        cluster.close()


def test_a_node_that_does_not_trust_the_others_says_so_in_its_log(
    tmp_path: Path, nats: NatsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = Authority(tmp_path, "ours")
    node = ca.issue("node", server=True, client=True)
    monkeypatch.setenv("PYQUEUE_TLS_CA", str(ca.path))
    # No --cluster-ca: the nodes trust the system's CAs, which never issued their certificates.
    cluster = Cluster(
        tmp_path, nats, 2, 2.0, "--tls-cert", str(node.cert), "--tls-key", str(node.key)
    ).start()
    try:
        line = cluster.nodes[0].wait_for("this node cannot forward to shard", 60)
        assert "CERTIFICATE_VERIFY_FAILED" in line and "the system's CAs (no --cluster-ca)" in line, line
    finally:
        cluster.close()
