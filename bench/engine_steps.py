"""The engine's own cost per job, in this process, with no gRPC: enqueue, claim, start and ack
through `Engine` on a real RocksDB directory, each step timed in CPU seconds.

    python bench/engine_steps.py [--jobs 100000] [--batch 500] [--rounds 3] [--commit-mode fsync]

This is the per-job part of what a shard spends on the batched cycle (`load.py`), without the
messages around it: the lever that moving work out of Python pulls on. Prints one JSON line per
round and the median: µs of CPU per job for each step (the process's, every thread), and the sum.
"""

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from pyqueue.engine import Engine, EngineConfig
from pyqueue.engine.model import JobView
from pyqueue.store import RocksStore

QUEUE = "bench"


def cpu() -> float:
    return time.process_time()


async def one_round(path: Path, jobs: int, batch: int, durable: bool) -> dict[str, float]:
    store = RocksStore(path)
    engine = Engine(store, EngineConfig(durable=durable))
    await engine.start(services=False)
    await engine.wait_rebuilt()
    spent: dict[str, float] = {}
    try:
        payload = b"x" * 100
        started = cpu()
        for start in range(0, jobs, batch):
            n = min(batch, jobs - start)
            await engine.enqueue([engine.new_job(i, "bench", QUEUE, None, payload, "") for i in range(n)])
        spent["enqueue"] = cpu() - started

        consumer = engine.consumer([QUEUE], batch, reports_starts=True)
        claim = start_ = ack = 0.0
        done = 0
        while done < jobs:
            t0 = cpu()
            taken: list[JobView] = await consumer.next_jobs(5.0)
            t1 = cpu()
            pairs = [(j.record.id, j.record.lease) for j in taken]
            consumer.start(pairs)
            await asyncio.sleep(0)  # the start commits at the end of this turn
            t2 = cpu()
            outcome = await consumer.ack(pairs)
            consumer.release(outcome)
            t3 = cpu()
            claim, start_, ack = claim + t1 - t0, start_ + t2 - t1, ack + t3 - t2
            done += len(taken)
        consumer.close(clean=True)
        spent.update(claim=claim, start=start_, ack=ack)
    finally:
        await engine.stop()
        store.close()
    out = {step: round(seconds * 1e6 / jobs, 2) for step, seconds in spent.items()}
    out["total"] = round(sum(spent.values()) * 1e6 / jobs, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commit-mode", default="fsync", choices=["fsync", "buffered"])
    args = parser.parse_args()
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            result = uvloop.run(
                one_round(Path(tmp) / "db", args.jobs, args.batch, args.commit_mode == "fsync")
            )
        rounds.append(result)
        print(json.dumps({"round": len(rounds), **result}))
    median = {key: round(statistics.median(r[key] for r in rounds), 2) for key in rounds[0]}
    print(
        json.dumps(
            {
                "median_us_per_job": median,
                "jobs": args.jobs,
                "batch": args.batch,
                "commit_mode": args.commit_mode,
                "payload_bytes": 100,
            }
        )
    )


if __name__ == "__main__":
    main()
