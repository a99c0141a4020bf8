"""A worker that goes silent without closing its socket (SIGSTOP: it can no longer answer HTTP/2
pings) is declared gone after the worker timeout, and its jobs go back to the queue."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from harness import ServerProcess

import pyqueue

HOLDER = textwrap.dedent("""
    import sys, pyqueue
    c = pyqueue.Client(sys.argv[1])
    stream = c.take("default", prefetch=1)
    print("holding", stream.next(timeout=20).id, flush=True)
    sys.stdin.read()
""")


def test_silent_worker_is_detected_within_the_worker_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--worker-timeout", "3", "--heartbeat", "1").start()
    worker = None
    try:
        with pyqueue.Client(server.address) as client:
            job_id = client.enqueue("t").id
            worker = subprocess.Popen(
                [sys.executable, "-c", HOLDER, server.address],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert worker.stdout is not None
            assert worker.stdout.readline().split() == ["holding", str(job_id)]
            os.kill(worker.pid, signal.SIGSTOP)
            frozen_at = time.monotonic()
            with client.take("default") as stream:
                job = stream.next(timeout=15)
                detected_after = time.monotonic() - frozen_at
            assert job is not None and job.id == job_id, "the frozen worker's job never came back"
            assert detected_after < 10, f"took {detected_after:.1f}s with a 3s worker timeout"
    finally:
        if worker is not None:
            worker.kill()
        server.close()
