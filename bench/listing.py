"""First page of ListJobs filtered by queue and status, on a store with 1M jobs: p50/p99.

    python bench/listing.py [--jobs 1000000] [--queries 500]

Fills the store in-process (10 queues, half the jobs ready and half scheduled), then serves it
and times ListJobs(queue=q, status=s, limit=50) over gRPC from a client.
"""

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import ServerProcess

import pyqueue

QUEUES = [f"q{i}" for i in range(10)]


async def fill(path: str, n: int) -> None:
    from pyqueue.engine import Engine, EngineConfig
    from pyqueue.store import RocksStore

    store = RocksStore(path)
    engine = Engine(store, EngineConfig(durable=False))
    await engine.start(services=False)
    await engine.wait_rebuilt()
    for start in range(0, n, 1000):
        queue = QUEUES[(start // 1000) % len(QUEUES)]
        await engine.enqueue(
            [
                engine.new_job(i, "t", queue, None, b"x" * 100, delay_ms=(i % 2) * 86_400_000)
                for i in range(min(1000, n - start))
            ]
        )
    await engine.stop()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--fill", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        asyncio.run(fill(args.fill, args.jobs))
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subprocess.run([sys.executable, __file__, "--fill", str(data), "--jobs", str(args.jobs)], check=True)
        server = ServerProcess(data).start()
        server.wait_for("rebuilt the in-memory sets")
        rng = random.Random(1)
        timings = []
        try:
            with pyqueue.Client(server.address) as client:
                assert client.count_jobs() == args.jobs
                for _ in range(args.queries):
                    queue, status = rng.choice(QUEUES), rng.choice(["ready", "scheduled"])
                    started = time.perf_counter()
                    jobs, _, _ = client.list_page(queue=queue, status=status, limit=50)
                    timings.append((time.perf_counter() - started) * 1000)
                    assert len(jobs) == 50
        finally:
            server.stop()
        timings.sort()
        print(
            json.dumps(
                {
                    "jobs_in_store": args.jobs,
                    "queries": len(timings),
                    "page": 50,
                    "p50_ms": round(statistics.median(timings), 2),
                    "p99_ms": round(timings[int(len(timings) * 0.99) - 1], 2),
                }
            )
        )


if __name__ == "__main__":
    main()
