"""A batch on a cluster: its jobs on both shards, the owner of the batch's shard SIGKILLed while
they run. The new owner has the batch (the changelog carries it), every node's relay carries the
other shard's events to it (each applied once), and on_complete fires once."""

import threading
import time
from pathlib import Path

from cluster_nodes import Cluster, wait_until

import pyqueue
from pyqueue.cluster import Topology
from pyqueue.errors import PyQueueError

TOPOLOGY = Topology(("", ""))
QUEUES = [next(f"q{i}" for i in range(100) if TOPOLOGY.shard_of_queue(f"q{i}") == s) for s in (0, 1)]
MEMBERS = 400


def test_a_batch_over_two_shards_finishes_once_through_the_death_of_its_home(
    cluster: Cluster, tmp_path: Path
) -> None:
    callbacks: dict[int, object] = {}
    acked = [0]
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                with (
                    pyqueue.Client(cluster.addresses, timeout=20) as client,
                    client.take([*QUEUES, "done"], prefetch=50) as stream,
                ):
                    while not stop.is_set():
                        job = stream.next(timeout=0.5)
                        if job is None:
                            if stream.server_stopping:  # a shard stopped or handed over: take again
                                break
                            continue
                        if job.type == "done":
                            callbacks[job.id] = job.input
                        job.ack()
                        acked[0] += 1
            except PyQueueError:
                time.sleep(0.2)

    members = [
        pyqueue.Task({"type": "m", "payload": {"i": i}, "queue": QUEUES[i % 2]}) for i in range(MEMBERS)
    ]
    with pyqueue.Client(cluster.addresses, timeout=30) as client:
        run = client.enqueue_workflow(
            pyqueue.Batch(members, on_complete=pyqueue.Task({"type": "done", "queue": "done"}))
        )
    home = run.batch_id & 0xFF
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        wait_until(lambda: acked[0] >= MEMBERS // 3, 60, "a third of the members acked")
        cluster.owner(home).kill()
        wait_until(lambda: callbacks, 120, "on_complete after the home's owner died")
        [status] = callbacks.values()
        assert status["total"] == MEMBERS and status["completed"] == MEMBERS  # type: ignore[index]
        with pyqueue.Client(cluster.addresses, timeout=30) as client:
            wait_until(
                lambda: "pyqueue_workflow_outbox_waiting 0.0" in client.metrics(), 60, "the relay drained"
            )
        assert len(callbacks) == 1
    finally:
        stop.set()
        worker.join(30)
