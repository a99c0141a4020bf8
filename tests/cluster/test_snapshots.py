"""The changelog does not grow forever: once it holds --snapshot-bytes, the owner snapshots its
store into NATS and trims the changelog. A node that joins later restores the snapshot, applies
what follows, and serves every job when the shards move to it."""

from cluster_nodes import Cluster, wait_until
from harness import pyqueue_command
from nats_servers import NatsCluster

import pyqueue
from pyqueue.cluster import Topology


def status(cluster: Cluster) -> dict:  # type: ignore[type-arg]
    import json

    done = pyqueue_command(
        "cluster", "status", "--cluster", cluster.nats.urls, "--cluster-name", cluster.name, "--json"
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_trimmed_changelog_is_restored_from_its_snapshot_by_a_new_node(tmp_path, nats: NatsCluster) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster(tmp_path, nats, 2, 2.0, "--snapshot-bytes", "20000").start()
    try:
        topology = Topology(("", ""))
        queues = [next(f"q{i}" for i in range(99) if topology.shard_of_queue(f"q{i}") == s) for s in (0, 1)]
        with pyqueue.Client(cluster.addresses) as client:
            ids = []
            for start in range(0, 2000, 100):
                batch = [
                    {"type": "t", "payload": start + i, "queue": queues[(start // 100) % 2]}
                    for i in range(100)
                ]
                ids += [j.id for j in client.enqueue_many(batch)]
        wait_until(
            lambda: all(s["changelog_first"] > 1 for s in status(cluster)["shard_status"]),
            60,
            "both changelogs trimmed after a snapshot",
        )
        newcomer = cluster.add_node("d")
        for shard in (0, 1):
            newcomer.wait_for(f"shard {shard}: restored the snapshot", timeout=60)
            newcomer.wait_for(f"shard {shard}: caught up", timeout=60)
        for name in "abc":  # every shard goes to d, the only node not drained, and stays there
            done = pyqueue_command(
                "cluster", "drain", name, "--cluster", nats.urls, "--cluster-name", cluster.name
            )
            assert done.returncode == 0, done.stderr
        wait_until(lambda: all(cluster.owner(s) is newcomer for s in (0, 1)), 30, "clients sent to d")
        with pyqueue.Client(cluster.addresses) as client:
            assert client.count_jobs() == 2000
            for n in (0, 777, 1999):
                assert client.get_job(ids[n]).payload == n
    finally:
        cluster.close()
