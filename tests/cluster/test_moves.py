"""The operator's moves: `pyqueue cluster move` hands a shard to a chosen node, `drain` moves every
shard off a node and keeps it off until `undrain`, with producers seeing no error meanwhile."""

import threading
import urllib.error
import urllib.request

from cluster_nodes import Cluster, Node, wait_until
from harness import pyqueue_command

import pyqueue


def cluster_command(cluster: Cluster, *args: str) -> str:
    done = pyqueue_command("cluster", *args, "--cluster", cluster.nats.urls, "--cluster-name", cluster.name)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def refused(cluster: Cluster, *args: str) -> str:
    done = pyqueue_command("cluster", *args, "--cluster", cluster.nats.urls, "--cluster-name", cluster.name)
    assert done.returncode != 0, done.stdout
    return done.stderr


class Producer(threading.Thread):
    def __init__(self, address: str) -> None:
        super().__init__(daemon=True)
        self.address, self.stop, self.errors, self.ids = address, threading.Event(), [], []  # type: ignore[var-annotated]

    def run(self) -> None:
        with pyqueue.Client(self.address, timeout=10) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                try:
                    self.ids.append(client.enqueue("t", n, queue=f"q{n % 4}", unique_key=f"m{n}").id)
                except pyqueue.PyQueueError as exc:
                    self.errors.append(exc)


def metrics_once_answered(node: Node) -> str:
    """The node's /metrics, once every shard it asks answers: right after a handover the shard
    that handed over restarts as a standby, and a loaded machine can catch /metrics in between (503)."""
    found: list[str] = []

    def read() -> bool:
        try:
            found.append(
                urllib.request.urlopen(f"http://{node.http_address}/metrics", timeout=30).read().decode()
            )
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                raise
            return False
        return True

    wait_until(read, 60, "/metrics answers")
    return found[-1]


def counter(text: str, series: str) -> float:
    """A series' value in a /metrics text (0 before its first count)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


HANDED_OVER = 'pyqueue_cluster_owner_exits_total{why="handed_over"}'
SHARD_0_CHANGES = 'pyqueue_cluster_owner_changes_total{shard="0"}'


def handovers_logged(node: Node) -> int:
    return sum("handed its lease over; it stands by again" in line for line in node.lines)


def test_move_and_drain_hand_shards_over_with_no_error_for_producers(cluster: Cluster) -> None:
    producer = Producer(cluster.addresses)
    producer.start()
    source = cluster.owner(0)
    target = next(n for n in cluster.nodes if n is not source)
    said = cluster_command(cluster, "move", "0", target.name)
    assert f"shard 0 moved to {target.name}" in said
    wait_until(lambda: cluster.owner(0) is target, 30, "clients are sent to the new owner")
    source.wait_for("shard 0 handed its lease over; it stands by again")
    # Nodes that start together may also balance (one took both shards and hands one over), so
    # the source may have handed over more than this shard: each handover it logged is counted
    # once (the count comes first, then the line).
    logged_before = handovers_logged(source)
    text = metrics_once_answered(source)
    assert logged_before <= counter(text, HANDED_OVER) <= handovers_logged(source), text
    assert counter(text, SHARD_0_CHANGES) >= 1, text

    said = cluster_command(cluster, "drain", target.name)
    assert f"{target.name} serves no shard" in said
    wait_until(lambda: all(cluster.owner(s) is not target for s in (0, 1)), 30, "clients are sent elsewhere")
    cluster_command(cluster, "undrain", target.name)
    said = cluster_command(cluster, "move", "1", target.name)
    wait_until(lambda: cluster.owner(1) is target, 30, "clients are sent to the new owner")
    producer.stop.set()
    producer.join(30)
    assert producer.errors == [], producer.errors[:3]
    with pyqueue.Client(cluster.addresses) as client:
        assert client.count_jobs() == len(producer.ids)


def test_moves_to_nowhere_are_refused(cluster: Cluster) -> None:
    assert "no node named 'zz' runs in the cluster" in refused(cluster, "move", "0", "zz")
    assert "there is no shard 7" in refused(cluster, "move", "7", "a")


def test_a_node_with_two_shards_fewer_than_another_takes_one_by_itself(cluster: Cluster) -> None:
    a, b, c = cluster.nodes
    cluster_command(cluster, "drain", c.name)
    for shard in (0, 1):
        cluster_command(cluster, "move", str(shard), a.name)
    # a owns both, b none: b asks a for one, and a hands it over. The ask comes first: before
    # it, a client's routes may still show the owners from before the moves, {a, b} too.
    b.wait_for("asking a to hand shard", 60)
    wait_until(lambda: {cluster.owner(0), cluster.owner(1)} == {a, b}, 60, "b took a shard from a")
