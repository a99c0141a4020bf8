"""Restart with 100,000 ready jobs in two queues and three priorities: the server delivers while its
in-memory sets are still loading, and in the right order (priority first, then FIFO, across both
queues), and enqueues are answered meanwhile."""

import os
import subprocess
import sys
from pathlib import Path

from harness import ServerProcess

import pyqueue

JOBS = 100_000
QUEUES = ("a", "b")


def test_delivers_in_order_while_the_rebuild_is_held_then_every_job(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--commit-mode", "buffered").start()
    try:
        expected: list[tuple[int, int]] = []
        with pyqueue.Client(server.address) as client:
            for start in range(0, JOBS, 1000):
                specs = [
                    {"type": "t", "payload": b"x", "queue": QUEUES[i % 2], "priority": (i // 7) % 3}
                    for i in range(start, start + 1000)
                ]
                for spec, job in zip(specs, client.enqueue_many(specs), strict=True):
                    expected.append((int(spec["priority"]), job.id))  # type: ignore[call-overload]
        server.stop()

        gate = tmp_path / "rebuild-gate"
        os.mkfifo(gate)
        server.env = {"PYQUEUE_FAILPOINT_REBUILD": str(gate)}
        server.restart()
        server.wait_for("delivering after")
        with pyqueue.Client(server.address) as client:
            # The rebuild is held with only each queue's head loaded: enqueues are answered...
            late = client.enqueue("t", b"late", queue="a", priority=0).id
            assert client.get_job(late).status == "ready"
            expected.append((0, late))
            expected.sort()
            got: list[int] = []
            with client.take(list(QUEUES), prefetch=1000) as stream:
                # ...and the most urgent job is delivered before the rest is loaded.
                first = stream.next(timeout=30)
                assert first is not None, "nothing was delivered while the rebuild was held"
                got.append(first.id)
                stream.ack(first)
                with open(gate, "wb"):
                    pass  # release the rebuild
                while len(got) < len(expected):
                    taken = stream.next(timeout=30)
                    assert taken is not None, f"only {len(got)} jobs came"
                    got.append(taken.id)
                    stream.ack(taken)
            assert got == [job_id for _, job_id in expected], "delivered out of priority or FIFO order"
        # The snapshot predates the late enqueue, which reached the ready set by its own path.
        assert f"{JOBS} ready" in server.wait_for("rebuilt the in-memory sets")
    finally:
        server.close()


_TO_OLD_LAYOUT = """
import sys
from pyqueue.engine.recovery import LAYOUT
from pyqueue.store import RocksStore, keys
from pyqueue.store.contract import Family
from pyqueue.store.records import Status
store = RocksStore(sys.argv[1])
batch = store.batch()
for key, value in list(store.scan(Family.INDEX, *keys.status_range(Status.READY))):
    batch.delete(Family.INDEX, key)
    batch.put(Family.INDEX, keys.status_prefix(Status.READY) + keys.pack_id(keys.id_suffix(key)), value)
batch.delete(Family.DATA, LAYOUT)
store.write(batch)
store.sync()
store.close()
"""


def _check(data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyqueue", "check", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_store_of_the_older_layout_is_rekeyed_once_then_runs_in_order(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data).start()
    try:
        with pyqueue.Client(server.address) as client:
            specs = [{"type": "t", "queue": QUEUES[i % 2], "priority": 5 - i % 3} for i in range(3000)]
            jobs = [job for i in range(0, 3000, 1000) for job in client.enqueue_many(specs[i : i + 1000])]
        expected = sorted((int(s["priority"]), j.id) for s, j in zip(specs, jobs, strict=True))  # type: ignore[call-overload]
        server.stop()
        # Key every ready entry by id alone and drop the layout mark, as an older version wrote.
        subprocess.run([sys.executable, "-c", _TO_OLD_LAYOUT, str(data)], check=True, timeout=120)
        assert "older version" in _check(data).stdout + _check(data).stderr

        server.restart()
        assert "rewrote 3000 ready index keys" in server.wait_for("rewrote")
        with pyqueue.Client(server.address) as client, client.take(list(QUEUES), prefetch=3000) as stream:
            got: list[int] = []
            while len(got) < len(expected):
                job = stream.next(timeout=30)
                assert job is not None, f"only {len(got)} jobs came"
                got.append(job.id)
        assert got == [job_id for _, job_id in expected]
        server.stop()
        checked = _check(data)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        server.close()
