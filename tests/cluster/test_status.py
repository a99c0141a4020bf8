"""`pyqueue cluster status` shows what the cluster holds: nodes, owners where clients are sent,
and standbys that catch up with the changelog."""

import json

from cluster_nodes import Cluster, Node, wait_until
from harness import pyqueue_command

import pyqueue


def status(cluster: Cluster) -> dict:  # type: ignore[type-arg]
    done = pyqueue_command(
        "cluster", "status", "--cluster", cluster.nats.urls, "--cluster-name", cluster.name, "--json"
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_status_shows_the_owners_clients_are_sent_to_and_standbys_catching_up(cluster: Cluster) -> None:
    with pyqueue.Client(cluster.addresses) as client:
        client.enqueue_many([{"type": "t", "queue": f"q{i % 4}"} for i in range(200)])
    found = status(cluster)
    assert found["shards"] == 2 and sorted(found["nodes"]) == ["a", "b", "c"]
    for shard in found["shard_status"]:
        assert shard["address"] == cluster.owner_address(shard["shard"])
        assert len(shard["standbys"]) == 2 and shard["owner"] not in {s["node"] for s in shard["standbys"]}

    def caught_up() -> bool:
        return all(s["lag"] == 0 for shard in status(cluster)["shard_status"] for s in shard["standbys"])

    wait_until(caught_up, 60, "every standby applied the changelog to its end")


def test_status_of_a_cluster_that_does_not_exist_says_so(cluster: Cluster) -> None:
    done = pyqueue_command("cluster", "status", "--cluster", cluster.nats.urls, "--cluster-name", "nope")
    assert done.returncode != 0 and "no cluster named 'nope'" in done.stderr


def test_metrics_count_what_the_owners_appended_to_their_changelogs(cluster: Cluster) -> None:
    import urllib.request

    with pyqueue.Client(cluster.addresses) as client:
        for i in range(20):
            client.enqueue("t", queue=f"q{i % 4}")

    def appends_on(node: Node) -> float:
        text = urllib.request.urlopen(f"http://{node.http_address}/metrics", timeout=30).read().decode()
        lines = [
            line for line in text.splitlines() if line.startswith("pyqueue_cluster_changelog_appends_total ")
        ]
        assert lines, f"no appends counter on node {node.name}"
        return float(lines[0].split()[1])

    # Each node counts what its own owners appended; the cluster's start-up balancing may hand a
    # shard to another node while the jobs go in, so the 20 appends are counted across the nodes.
    per_node = [appends_on(node) for node in cluster.nodes]
    assert sum(per_node) >= 20, per_node
    node = cluster.nodes[0]
    text = urllib.request.urlopen(f"http://{node.http_address}/metrics", timeout=30).read().decode()
    assert "pyqueue_cluster_append_seconds_bucket" in text

    def lag_shown() -> bool:
        text = urllib.request.urlopen(f"http://{node.http_address}/metrics", timeout=30).read().decode()
        return "pyqueue_cluster_standby_lag_entries{" in text

    wait_until(lag_shown, 30, "the node's standbys' lag in its metrics")
