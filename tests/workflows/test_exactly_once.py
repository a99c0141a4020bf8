"""A 10,000-job batch over four queues on two shards, with random failures, deliberate deaths,
and shard 0 SIGKILLed twice and shard 1 once while it runs: every job is counted once, each callback fires once
(on_complete with the dead jobs listed; on_success and the chord's next step only after the dead
ones are retried), and the chord gets all 10,000 results in order."""

import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness import ServerProcess

import pyqueue
from pyqueue.errors import PyQueueError

MEMBERS = 10_000
QUEUES = ["images", "thumbs", "albums", "reports"]  # two on each shard of two
CALLBACKS = ["mail", "publish"]
DOOMED = {i for i in range(MEMBERS) if i % 500 == 7}  # killed on purpose: dead at once


def shard_pid(server: ServerProcess, shard: int) -> int:
    assert server.proc is not None
    out = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
    return next(
        int(p) for p in out.stdout.split() if f"shard-{shard}" in Path(f"/proc/{p}/cmdline").read_text()
    )


class Workers:
    """Threads taking every queue, failing 5% of attempts at random; doomed members die until
    `mended` is set. They reconnect through shard kills; what they saw is kept by job id."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.mended = threading.Event()
        self.stop = threading.Event()
        self.acked: Counter[int] = Counter()  # member index -> acks the server took
        self.callbacks: dict[str, dict[int, Any]] = {"on_complete": {}, "on_success": {}, "then": {}}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(2)]
        for t in self.threads:
            t.start()

    def run(self, n: int) -> None:
        rng = random.Random(n)
        while not self.stop.is_set():
            try:
                with (
                    pyqueue.Client(self.address, timeout=20) as client,
                    client.take(QUEUES + CALLBACKS, prefetch=100) as stream,
                ):
                    while not self.stop.is_set():
                        job = stream.next(timeout=0.5)
                        if job is not None:
                            self.handle(job, rng)
                        elif stream.server_stopping:  # a shard stopped: take again
                            break
            except PyQueueError:
                time.sleep(0.2)  # a shard died under us: take again

    def handle(self, job: pyqueue.Job, rng: random.Random) -> None:
        if job.type in self.callbacks:
            with self.lock:
                self.callbacks[job.type][job.id] = job.input
            job.ack()
            return
        i = job.payload["i"]
        if i in DOOMED and not self.mended.is_set():
            job.fail("doomed", kill=True)
        elif rng.random() < 0.05:
            job.fail("flaky")
        else:
            job.ack(i)  # the result goes to the chord's next step
            with self.lock:
                self.acked[i] += 1

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def wait(what: str, check: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not after {timeout}s"
        time.sleep(0.2)


def test_a_10000_job_batch_on_two_shards_fires_each_callback_once_through_three_shard_kills(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "2", "--max-workflow-jobs", "10010").start()
    fast = (0.05, 1.0, 0.0)  # retries within a second: the test is about counting, not waiting
    members = [
        pyqueue.Task(
            {
                "type": "member",
                "payload": {"i": i},
                "queue": QUEUES[i % 4],
                "max_retries": 10,
                "backoff": fast,
            }
        )
        for i in range(MEMBERS)
    ]
    workflow = pyqueue.Batch(
        members,
        on_complete=pyqueue.Task({"type": "on_complete", "queue": "mail"}),
        on_success=pyqueue.Task({"type": "on_success", "queue": "mail"}),
        name="ten thousand",
    ).then(pyqueue.Task({"type": "then", "queue": "publish"}))
    workers = None
    try:
        with pyqueue.Client(server.address, timeout=60) as client:
            run = client.enqueue_workflow(workflow)
            workers = Workers(server.address)

            def done() -> int:
                with workers.lock:
                    return len(workers.acked)

            kills: Counter[int] = Counter()
            for shard, share in ((0, 2500), (1, 5000), (0, 7500)):  # shard 0 twice, shard 1 once
                wait(f"{share} members acked", lambda share=share: done() >= share)
                os.kill(shard_pid(server, shard), signal.SIGKILL)
                kills[shard] += 1
                assert server.output is not None
                server.output.wait_lines(f"shard {shard} is back on", kills[shard], timeout=60)

            wait("on_complete", lambda: workers.callbacks["on_complete"])
            batch = client.batch(run.batch_id)
            assert (batch.total, batch.pending, batch.completed, batch.dead) == (
                MEMBERS,
                0,
                MEMBERS - len(DOOMED),
                len(DOOMED),
            )
            assert batch.fired == ("complete",)
            [status] = workers.callbacks["on_complete"].values()
            assert status["dead"] == len(DOOMED) and len(status["dead_jobs"]) == len(DOOMED)
            assert not workers.callbacks["on_success"] and not workers.callbacks["then"]

            workers.mended.set()
            client.retry_workflow(run.workflow_id)
            wait("on_success and then", lambda: workers.callbacks["on_success"] and workers.callbacks["then"])
            [results] = workers.callbacks["then"].values()
            assert results == list(range(MEMBERS)), "the chord's results, each once, in order"
            # (The workers' own count can miss an ack whose answer a kill cut off: the server's
            # results above are what counts.)
            # Nothing fires twice, however long we look: the relay has nothing left to carry.
            wait("the outbox drained", lambda: "pyqueue_workflow_outbox_waiting 0.0" in client.metrics())
            assert len(workers.callbacks["on_complete"]) == 1
            assert len(workers.callbacks["on_success"]) == 1 and len(workers.callbacks["then"]) == 1
    finally:
        if workers is not None:
            workers.close()
        server.close()
