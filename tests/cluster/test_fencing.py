"""Fencing: an owner that is paused past its lease (a partition, a stall) and then runs again can
commit nothing more. Its appends name a changelog sequence the new owner has moved past, so they
are refused; its lease is gone; it stops at once and comes back as a standby. A job its worker
held is the new owner's to deliver, and the old worker's ack is not kept."""

import os
import signal
import threading

from cluster_nodes import Cluster, wait_until

import pyqueue
from pyqueue.cluster import Topology


def queue_on(shard: int, shards: int = 2) -> str:
    topology = Topology(("",) * shards)
    return next(f"q{i}" for i in range(100) if topology.shard_of_queue(f"q{i}") == shard)


def test_a_paused_owner_commits_nothing_once_its_lease_is_gone(cluster: Cluster) -> None:
    queue = queue_on(0)
    old = cluster.owner(0)
    old_address = cluster.owner_address(0)
    pid = old.shard_pid(0)
    with pyqueue.Client(old_address, timeout=30, routing=False) as direct:
        held_id = direct.enqueue("t", "held", queue=queue).id
        stream = direct.take(queue)
        stream.__enter__()
        held = stream.next(timeout=30)
        assert held is not None and held.id == held_id
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(lambda: cluster.owner_address(0) != old_address, 60, "a standby took shard 0")
            # Calls sent to the paused owner wait in its socket, and run when it resumes.
            answered: list[object] = []

            def enqueue_on_the_old_owner() -> None:
                try:
                    answered.append(direct.enqueue("t", "late", queue=queue).id)
                except pyqueue.PyQueueError as exc:
                    answered.append(exc)

            late = threading.Thread(target=enqueue_on_the_old_owner)
            late.start()
            acked: list[object] = []
            ack = threading.Thread(target=lambda: acked.append(_try(held.ack)))
            ack.start()
        finally:
            os.kill(pid, signal.SIGCONT)
        late.join(60)
        ack.join(60)
        assert answered and isinstance(answered[0], pyqueue.PyQueueError), answered
        assert acked and isinstance(acked[0], pyqueue.PyQueueError), acked
        stream.__exit__(None, None, None)
    old.wait_for("lost the shard", timeout=30)
    old.output.wait_lines("standing by for shard 0", count=2, timeout=60)  # type: ignore[union-attr]
    # The held job was not completed by the old worker's ack: the new owner delivers it again.
    with pyqueue.Client(cluster.addresses, timeout=30) as client, client.take(queue) as again:
        job = again.next(timeout=60)
        assert job is not None and job.id == held_id
        # Its worker never reported a start, so it is handed back uncounted, as at a restart.
        assert job.lost == 0
        job.ack()
        assert not any(isinstance(a, int) for a in answered)


def _try(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except pyqueue.PyQueueError as exc:
        return exc
