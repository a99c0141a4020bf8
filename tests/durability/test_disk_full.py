"""A full disk: enqueues are refused with RESOURCE_EXHAUSTED and a clear message, nothing already
acknowledged is lost, and enqueues are taken again once space returns, without a restart.

The data directory sits on a small tmpfs (needs root to mount it)."""

import os
import subprocess

import pytest
from harness import ServerProcess

import pyqueue

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
MIB = 1 << 20


@pytest.fixture
def small_disk(tmp_path):  # type: ignore[no-untyped-def]
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_refuses_enqueues_then_recovers(small_disk) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(small_disk / "data", "--min-free-bytes", str(24 * MIB)).start()
    filler = small_disk / "filler"
    try:
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        filler.write_bytes(b"\0" * (free - 40 * MIB))
        acknowledged: list[int] = []
        with pyqueue.Client(server.address) as client:
            with pytest.raises(pyqueue.ResourceExhausted) as refused:
                for _ in range(200):
                    batch = client.enqueue_many(
                        [{"type": "t", "payload": os.urandom(256 * 1024)} for _ in range(4)]
                    )
                    acknowledged.extend(j.id for j in batch)
            assert "--min-free-bytes" in str(refused.value) and "nothing was written" in str(refused.value)
            assert acknowledged, "the disk filled before anything was enqueued"
            for job_id in acknowledged:
                assert client.get_job(job_id).status == "ready"
            filler.unlink()  # space returns
            again = client.enqueue("t", b"after").id
            assert client.get_job(again).status == "ready"
        assert server.proc is not None and server.proc.poll() is None, "the server should have kept running"
    finally:
        server.close()
