"""Power loss: the data directory sits on lossyfs (a FUSE passthrough that drops every byte and
directory entry not synced when it is unmounted). Each crash point: enqueue under load, SIGKILL
the server at a random moment, cut the power (unmount), remount, restart, and check that every
acknowledged enqueue is there.

fsync mode must lose nothing over PYQUEUE_POWER_CUTS crash points (20 by default); buffered mode,
which never syncs, must be caught losing acknowledged jobs: that proves the test can see a loss.
"""

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness import ServerProcess

import pyqueue

CUTS = int(os.environ.get("PYQUEUE_POWER_CUTS", "20"))
PER_CUT = 3  # enqueues acknowledged by each started server before its kill: every cut is under load
LOSSYFS = Path(__file__).with_name("lossyfs.py")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or not os.path.exists("/dev/fuse")
    or shutil.which("fusermount3") is None
    or subprocess.run([sys.executable, "-c", "import mfusepy"], capture_output=True).returncode != 0,
    reason="needs root, /dev/fuse, fusermount3 (apt fuse3) and mfusepy",
)


class PowerCuttableDisk:
    def __init__(self, root: Path) -> None:
        self.backing = root / "backing"
        self.mountpoint = root / "mnt"
        self.backing.mkdir()
        self.mountpoint.mkdir()
        self.proc: subprocess.Popen[bytes] | None = None

    def mount(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(LOSSYFS), str(self.backing), str(self.mountpoint)])
        deadline = time.monotonic() + 20
        while not os.path.ismount(self.mountpoint):  # the mount appears asynchronously
            assert self.proc.poll() is None, "lossyfs exited"
            assert time.monotonic() < deadline, "lossyfs did not mount"
            time.sleep(0.02)

    def cut_power(self) -> None:
        # A killed supervisor's shards die with it a moment later; until then the mount is busy.
        deadline = time.monotonic() + 30
        while subprocess.run(["fusermount3", "-u", str(self.mountpoint)], timeout=30).returncode != 0:
            assert time.monotonic() < deadline, "the mount stayed busy for 30 s after the kill"
            time.sleep(0.05)
        assert self.proc is not None
        assert self.proc.wait(60) == 0

    def close(self) -> None:
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], check=False)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


def crash_points(tmp_path: Path, mode: str, cuts: int, seed: int, shards: int = 1) -> dict[str, int]:
    rng = random.Random(seed)
    disk = PowerCuttableDisk(tmp_path)
    acknowledged: dict[int, int] = {}  # job id -> payload
    lock = threading.Lock()
    counter = iter(range(10**9))
    lost_ids: set[int] = set()
    try:
        for _ in range(cuts):
            disk.mount()
            server = ServerProcess(
                disk.mountpoint / "data", "--commit-mode", mode, "--shards", str(shards)
            ).start()
            stop = threading.Event()

            def produce(address: str, stop: threading.Event) -> None:
                with pyqueue.Client(address, timeout=5) as client:
                    while not stop.is_set():
                        with lock:
                            payload = next(counter)
                        try:
                            job_id = client.enqueue("t", payload).id
                        except pyqueue.PyQueueError:
                            return
                        with lock:
                            acknowledged[job_id] = payload

            producers = [threading.Thread(target=produce, args=(server.address, stop)) for _ in range(4)]
            with lock:
                enough = len(acknowledged) + PER_CUT
            for p in producers:
                p.start()
            # Waited for, not slept: on a loaded machine the first enqueues can take a fixed pause.
            deadline = time.monotonic() + 60
            while True:
                with lock:
                    if len(acknowledged) >= enough:
                        break
                assert time.monotonic() < deadline, "the restarted server acknowledged nothing in 60 s"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.1, 0.5))  # a random moment under load
            server.kill()
            stop.set()
            for p in producers:
                p.join(10)
            disk.cut_power()
        disk.mount()
        server = ServerProcess(
            disk.mountpoint / "data", "--commit-mode", mode, "--shards", str(shards)
        ).start()
        with pyqueue.Client(server.address) as client:
            for job_id, payload in acknowledged.items():
                try:
                    if client.get_job(job_id).payload != payload:
                        lost_ids.add(job_id)
                except pyqueue.NotFound:
                    lost_ids.add(job_id)
        server.stop()
        disk.cut_power()
    finally:
        disk.close()
    return {"crash_points": cuts, "acknowledged": len(acknowledged), "lost": len(lost_ids)}


@pytest.mark.slow
@pytest.mark.timeout(60 + 15 * CUTS)
def test_fsync_mode_loses_nothing_acknowledged_at_power_cuts(tmp_path: Path) -> None:
    result = crash_points(tmp_path, "fsync", CUTS, seed=11)
    print(f"\npower loss, fsync mode: {result}")
    assert result["acknowledged"] > 50, result
    assert result["lost"] == 0, result


@pytest.mark.slow
@pytest.mark.timeout(60 + 20 * CUTS)
def test_two_shards_restart_and_lose_nothing_acknowledged_at_power_cuts(tmp_path: Path) -> None:
    # The shards' stores and the supervisor's metadata files (cluster.json, topology.json) alike.
    result = crash_points(tmp_path, "fsync", max(CUTS // 2, 3), seed=13, shards=2)
    print(f"\npower loss, fsync mode, 2 shards: {result}")
    assert result["acknowledged"] > 50, result
    assert result["lost"] == 0, result


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_same_test_catches_buffered_mode_losing_jobs(tmp_path: Path) -> None:
    result = crash_points(tmp_path, "buffered", 3, seed=12)
    print(f"\npower loss, buffered mode: {result}")
    assert result["lost"] > 0, f"buffered mode lost nothing: the test cannot see a loss ({result})"
