"""The everyday path through a failover: `pyqueue worker` and an app's job function, both given the
cluster's addresses, one job per call; the owner of the job's shard is killed with SIGKILL midway.
The worker takes again from the new owner by itself, and every job enqueued runs."""

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "app"))

import sample_app  # noqa: E402
from cluster_nodes import Cluster  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.cluster import Topology  # noqa: E402


def ran(log: Path) -> set[int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return {int(line.split()[1]) for line in lines if line.startswith("add ")}


def wait_ran(log: Path, expected: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not expected <= ran(log):
        assert time.monotonic() < deadline, f"never ran: {sorted(expected - ran(log))[:10]}"
        time.sleep(0.05)


def test_pyqueue_worker_and_an_app_ride_through_the_death_of_an_owner(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "ran.log"
    sample_app.app.address = cluster.addresses
    sample_app.LOG = log
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "sample_app:app"],
        cwd=HERE.parent / "app",
        env={**os.environ, "PYQUEUE_ADDRESS": cluster.addresses, "SAMPLE_LOG": str(log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for n in range(50):
            sample_app.add.enqueue(n, 0)
        wait_ran(log, set(range(50)), 60)
        shard = Topology(("", "")).shard_of_queue("work")
        cluster.owner(shard).kill()
        for n in range(50, 100):
            while True:  # a lost answer (the owner died mid-call) is the caller's to send again
                try:
                    sample_app.add.enqueue(n, 0)
                    break
                except pyqueue.Unavailable:
                    time.sleep(0.1)
        wait_ran(log, set(range(100)), 90)
    finally:
        worker.terminate()
        worker.wait(60)
        sample_app.app.close()
