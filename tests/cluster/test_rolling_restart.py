"""A rolling restart: every node stopped (SIGTERM) and started again, one after another, while
producers enqueue and a worker completes jobs. A stopping owner answers what it holds and hands its
lease back, so a standby takes over at once; producers see no error (the client sends an enqueue
again while a shard moves, when that cannot make a second job), and nothing is lost."""

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "durability"))

import pytest
from cluster_nodes import Cluster, wait_until
from history import History, Load

import pyqueue


class KeyedProducer:
    """One job per call, each with a unique key (so every retry is safe), as an application does."""

    def __init__(self, address: str, history: History) -> None:
        self.address, self.history = address, history
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        # The claim is that no call fails, not that each is quick: a handover on a loaded
        # machine (CI with CPU burners beside it) has taken past 10 s, so the deadline is wide.
        with pyqueue.Client(self.address, timeout=45) as client:
            n = 10**8
            while not self.stop.is_set():
                n += 1
                with self.history.lock:
                    self.history.attempted.add(n)
                try:
                    client.enqueue("t", n, queue=f"q{n % 4}", unique_key=f"k{n}")
                except pyqueue.PyQueueError as exc:
                    self.errors.append(exc)
                    continue
                with self.history.lock:
                    self.history.acknowledged.add(n)


# Three nodes stopped and restarted one after another under load: 70 s on a quiet 2-core machine,
# past the suite's default 120 s with two CPU burners beside it.
@pytest.mark.timeout(300)
def test_a_rolling_restart_under_load_loses_nothing_and_producers_see_no_error(cluster: Cluster) -> None:
    history = History()
    load = Load(history, cluster.addresses, producers=1, queues=("q0", "q1", "q2", "q3"))
    keyed = KeyedProducer(cluster.addresses, history)
    load.start()
    keyed.thread.start()
    for node in cluster.nodes:
        wait_until(lambda: len(history.ack_confirmed) >= 100, 60, "jobs completing")
        done = len(history.ack_confirmed)
        started = time.monotonic()
        assert node.stop(60) == 0
        node.restart(90)
        history.crashes.append((started, time.monotonic()))
        wait_until(
            lambda d=done: len(history.ack_confirmed) >= d + 100, 60, "jobs completing after the restart"
        )  # type: ignore[misc]
    keyed.stop.set()
    keyed.thread.join(60)
    assert not keyed.thread.is_alive()
    load.drain(90)
    verdict = history.verdict()
    assert keyed.errors == [], keyed.errors[:5]
    assert verdict["lost"] == 0, verdict
    assert verdict["delivered_after_ack"] == 0, verdict
    assert verdict["unexplained_duplicates"] == 0, verdict
