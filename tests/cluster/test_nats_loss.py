"""The loss of one NATS server (SIGKILL) under load: the changelogs and leases keep a quorum on
the other two, the nodes' connections move to them, and nothing acknowledged is lost. The pause
while JetStream elects new leaders for what the dead server led is printed (bench/cluster.py
measures it)."""

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "durability"))

from cluster_nodes import Cluster, wait_until
from history import History, Load
from nats_servers import NatsCluster


@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[NatsCluster]:
    servers = NatsCluster(tmp_path / "nats").start()
    yield servers
    servers.stop()


@pytest.mark.timeout(240)
def test_the_loss_of_one_nats_server_stops_nothing_for_long_and_loses_nothing(
    tmp_path: Path, own_nats: NatsCluster
) -> None:
    cluster = Cluster(tmp_path, own_nats, lease_s=5.0).start()
    try:
        history = History()
        load = Load(history, cluster.addresses, producers=2, queues=("q0", "q1", "q2", "q3"))
        load.start()
        wait_until(lambda: len(history.ack_confirmed) >= 200, 60, "200 jobs completed before the loss")
        killed_at = time.monotonic()
        own_nats.servers[0].kill()
        done = len(history.ack_confirmed)
        wait_until(lambda: len(history.ack_confirmed) >= done + 500, 120, "500 more jobs completed after it")
        print(f"500 more jobs completed {time.monotonic() - killed_at:.1f}s after the NATS server died")
        load.drain(120)
        # The server stays dead to the end, and what it led may be elected again later (an owner
        # then steps down): the whole rest of the run is the fault's window.
        history.crashes.append((killed_at, time.monotonic()))
        verdict = history.verdict()
        twice = {
            p: [t - killed_at for t in times] for p, times in history.deliveries.items() if len(times) > 1
        }
        print(
            "delivered twice (s after the kill):",
            twice,
            "window:",
            [(a - killed_at, b - killed_at) for a, b in history.crashes],
        )
        assert verdict["lost"] == 0, verdict
        assert verdict["delivered_after_ack"] == 0, verdict
        assert verdict["unexplained_duplicates"] == 0, verdict
    finally:
        cluster.close()
