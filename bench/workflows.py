"""What workflows cost, in one run (docs/workflows.md and the closing note of #35 quote it).

    python bench/workflows.py overhead [--jobs 10000] [--rounds 3] [--shards 2]
        10,000 plain jobs (enqueue_many, 1,000 a call) against one 10,000-job batch (one
        EnqueueWorkflow call, with an on_complete callback), over four queues, two on each shard,
        rounds interleaved: the enqueue's time, the full cycle's (enqueue, then every job taken
        and acked, and for the batch its callback delivered) jobs/s, and the server's CPU per job
    python bench/workflows.py latency [--trials 200]
        from the ack of a batch's last job (sent by the worker) to its on_complete callback
        reaching a waiting worker: p50 and p99, with the callback on the job's shard and on the
        other shard (through the relay)

The server runs `--shards 2`, fsync commits, on loopback; producer and consumers are this
process (one take stream over every queue, prefetch 1,000). The machine has 2 cores, shared by
all of it.
"""

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE)]

from harness import ServerProcess  # noqa: E402
from single_enqueue import cpu_seconds  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.cluster import Topology  # noqa: E402


def queues_on(shard: int, n: int, shards: int = 2) -> list[str]:
    topology = Topology(("",) * shards)
    return [q for q in (f"q{i}" for i in range(1000)) if topology.shard_of_queue(q) == shard][:n]


QUEUES = queues_on(0, 2) + queues_on(1, 2)
CALLBACK = queues_on(1, 3)[2]


def specs(jobs: int) -> list[dict[str, Any]]:
    return [{"type": "member", "payload": {"i": i}, "queue": QUEUES[i % 4]} for i in range(jobs)]


def consume(client: pyqueue.Client, jobs: int, callback: bool) -> None:
    """Take and ack `jobs` jobs (and the callback, when there is one) from every queue."""
    left = jobs + (1 if callback else 0)
    with client.take([*QUEUES, CALLBACK], prefetch=1000) as stream:
        while left:
            job = stream.next(timeout=60)
            assert job is not None, f"{left} jobs never came"
            job.ack(wait=False)  # as a worker with many jobs in hand: answers go out together
            left -= 1


def one_round(server: ServerProcess, jobs: int, kind: str) -> dict[str, float]:
    assert server.proc is not None
    with pyqueue.Client(server.address, timeout=120) as client:
        cpu_before = cpu_seconds(server.proc.pid)
        started = time.perf_counter()
        if kind == "plain":
            all_specs = specs(jobs)
            for i in range(0, jobs, 1000):
                client.enqueue_many(all_specs[i : i + 1000])
        else:
            members = [pyqueue.Task(s) for s in specs(jobs)]
            done = pyqueue.Task({"type": "done", "queue": CALLBACK})
            client.enqueue_workflow(pyqueue.Batch(members, on_complete=done))
        enqueued = time.perf_counter() - started
        consume(client, jobs, callback=kind == "batch")
        cycle = time.perf_counter() - started
        cpu = cpu_seconds(server.proc.pid) - cpu_before
    return {
        "enqueue_s": enqueued,
        "enqueue_jobs_per_s": jobs / enqueued,
        "cycle_jobs_per_s": jobs / cycle,
        "server_cpu_us_per_job": cpu * 1e6 / jobs,
    }


def overhead(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            Path(tmp) / "data", "--shards", str(args.shards), "--max-workflow-jobs", str(args.jobs + 10)
        ).start()
        try:
            results: dict[str, list[dict[str, float]]] = {"plain": [], "batch": []}
            one_round(server, 1000, "plain")  # warm both paths
            one_round(server, 1000, "batch")
            for _ in range(args.rounds):
                for kind in ("plain", "batch"):
                    results[kind].append(one_round(server, args.jobs, kind))
        finally:
            server.close()
    medians = {
        kind: {name: round(statistics.median(r[name] for r in rounds), 3) for name in rounds[0]}
        for kind, rounds in results.items()
    }
    ratio = {
        "cycle_batch_over_plain": round(
            medians["batch"]["cycle_jobs_per_s"] / medians["plain"]["cycle_jobs_per_s"], 3
        ),
        "cpu_batch_over_plain": round(
            medians["batch"]["server_cpu_us_per_job"] / medians["plain"]["server_cpu_us_per_job"], 3
        ),
    }
    print(json.dumps({"jobs": args.jobs, "rounds": args.rounds, **medians, **ratio}, indent=2))


def latency(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", "--shards", "2").start()
        try:
            out = {}
            member = queues_on(0, 1)[0]
            for where, callback in (("same shard", queues_on(0, 2)[1]), ("other shard", queues_on(1, 1)[0])):
                out[where] = _latencies(server.address, member, callback, args.trials)
        finally:
            server.close()
    print(json.dumps({"trials": args.trials, **out}, indent=2))


def _latencies(address: str, member: str, callback: str, trials: int) -> dict[str, float]:
    arrived: list[float] = []
    got = threading.Semaphore(0)

    def wait_callbacks() -> None:
        with pyqueue.Client(address) as client, client.take(callback, prefetch=10) as stream:
            while len(arrived) < trials + 1:
                job = stream.next(timeout=30)
                if job is not None:
                    arrived.append(time.perf_counter())
                    job.ack()
                    got.release()

    waiter = threading.Thread(target=wait_callbacks, daemon=True)
    waiter.start()
    seconds = []
    with pyqueue.Client(address) as client, client.take(member, prefetch=1) as stream:
        for trial in range(trials + 1):  # the first one warms the path
            batch = pyqueue.Batch(
                [pyqueue.Task({"type": "m", "queue": member})],
                on_complete=pyqueue.Task({"type": "cb", "queue": callback}),
            )
            client.enqueue_workflow(batch)
            job = stream.next(timeout=30)
            assert job is not None
            sent = time.perf_counter()
            job.ack()
            assert got.acquire(timeout=30), "the callback never came"
            if trial:
                seconds.append(arrived[-1] - sent)
    waiter.join(30)
    seconds.sort()
    return {
        "p50_ms": round(statistics.median(seconds) * 1000, 2),
        "p99_ms": round(seconds[int(len(seconds) * 0.99) - 1] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--jobs", type=int, default=10_000)
    o.add_argument("--rounds", type=int, default=3)
    o.add_argument("--shards", type=int, default=2)
    lat = sub.add_parser("latency")
    lat.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    overhead(args) if args.what == "overhead" else latency(args)


if __name__ == "__main__":
    main()
