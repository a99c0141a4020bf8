"""A worker host that vanishes without closing its socket is detected within the worker timeout,
and its jobs go back to the queue.

The vanishing is real TCP silence on loopback: the worker runs with its own group id, and an
iptables rule drops every packet that group sends, so the server's data and keepalive pings go
unacknowledged (grpc's keepalive and TCP_USER_TIMEOUT must notice). Needs root and iptables, as in
CI (.ci/run installs iptables).
"""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from harness import ServerProcess

import pyqueue

SILENT_GID = "65534"
HOLDER = textwrap.dedent("""
    import sys, pyqueue
    c = pyqueue.Client(sys.argv[1])
    stream = c.take("default", prefetch=1)
    print("holding", stream.next(timeout=20).id, flush=True)
    sys.stdin.read()
""")
RULE = ["OUTPUT", "-o", "lo", "-m", "owner", "--gid-owner", SILENT_GID, "-j", "DROP"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("setpriv") is None,
    reason="needs root, iptables and setpriv to make a worker's host fall silent",
)


def test_vanished_worker_host_is_detected_within_the_worker_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--worker-timeout", "3", "--heartbeat", "1").start()
    worker = None
    silenced = False
    try:
        with pyqueue.Client(server.address) as client:
            job_id = client.enqueue("t").id
            worker = subprocess.Popen(
                [
                    "setpriv",
                    f"--regid={SILENT_GID}",
                    "--clear-groups",
                    sys.executable,
                    "-c",
                    HOLDER,
                    server.address,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert worker.stdout is not None
            assert worker.stdout.readline().split() == ["holding", str(job_id)]
            subprocess.run(["iptables", "-I", *RULE], check=True)
            silenced = True
            vanished_at = time.monotonic()
            with client.take("default") as stream:
                job = stream.next(timeout=15)
                detected_after = time.monotonic() - vanished_at
            assert job is not None and job.id == job_id, "the vanished worker's job never came back"
            assert job.attempts == 2
            assert detected_after < 8, f"took {detected_after:.1f}s with a 3s worker timeout"
    finally:
        if silenced:
            subprocess.run(["iptables", "-D", *RULE], check=False)
        if worker is not None:
            worker.kill()
        server.close()
