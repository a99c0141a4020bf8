"""A cluster keeps every acknowledged job through the death of a node: producers and a worker run
against the cluster's addresses while the owner of a shard is killed with SIGKILL (supervisor and
shard processes at once, as when a host dies); the history checker then finds nothing lost, nothing
completed coming back, and duplicates only of jobs in flight at the kill."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "durability"))

from cluster_nodes import Cluster, wait_until
from history import History, Load

import pyqueue


def test_sigkill_of_an_owner_loses_nothing_acknowledged(cluster: Cluster) -> None:
    history = History()
    load = Load(history, cluster.addresses, producers=2, queues=("q0", "q1", "q2", "q3"))
    load.start()
    wait_until(lambda: len(history.ack_confirmed) >= 200, 60, "200 jobs completed before the kill")
    victim = cluster.owner(0)
    killed_at = time.monotonic()
    victim.kill()
    enough = len(history.ack_confirmed) + 200
    wait_until(lambda: len(history.ack_confirmed) >= enough, 90, "200 more jobs completed after the kill")
    history.crashes.append((killed_at, time.monotonic()))
    load.drain(90)
    verdict = history.verdict()
    print(verdict)
    assert verdict["acknowledged"] > 400 and verdict["crashes"] == 1, verdict
    assert verdict["lost"] == 0, verdict
    assert verdict["unexpected"] == 0, verdict
    assert verdict["delivered_after_ack"] == 0, verdict
    assert verdict["unexplained_duplicates"] == 0, verdict
    assert cluster.owner(0) is not victim


def test_a_standby_serves_what_the_owner_acknowledged(cluster: Cluster) -> None:
    with pyqueue.Client(cluster.addresses, timeout=20) as client:
        ids = [client.enqueue("t", {"n": i}, queue=f"q{i % 4}").id for i in range(50)]
        victim = cluster.owner(0)
        victim.kill()
        # Every job is found on whichever node owns its shard now, with its payload.
        for n, job_id in enumerate(ids):
            job = _retrying(lambda j=job_id: client.get_job(j))  # type: ignore[misc]
            assert job.payload == {"n": n}
    assert cluster.owner(0) is not victim


def _retrying(call, timeout: float = 60):  # type: ignore[no-untyped-def]
    """What an application does while a shard fails over: try again on UNAVAILABLE."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except pyqueue.Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
