"""Start-up time with 1M ready jobs: on a fresh store, and after 5M jobs have flowed through.

    python bench/startup.py [--ready 1000000] [--flowed 5000000]

Each measurement opens the store in a fresh process and times recovery plus the rebuild of the
in-memory sets (what a restarting server does before it can deliver). Runs the engine in-process
(buffered commits) to fill and flow jobs quickly; the store is the real thing.
"""

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyqueue.engine import Engine, EngineConfig
from pyqueue.store import RocksStore


async def fill(path: str, n: int, queue: str) -> None:
    store = RocksStore(path)
    engine = Engine(store, EngineConfig(durable=False))
    await engine.start()
    await engine.wait_rebuilt()
    for start in range(0, n, 1000):
        await engine.enqueue(
            [engine.new_job(i, "t", queue, None, b"x" * 100) for i in range(min(1000, n - start))]
        )
    await engine.stop()
    store.close()


async def flow(path: str, n: int) -> None:
    store = RocksStore(path)
    engine = Engine(store, EngineConfig(durable=False))
    await engine.start()
    await engine.wait_rebuilt()
    consumer = engine.consumer(["flow"], 1000)
    done = 0
    while done < n:
        await engine.enqueue([engine.new_job(i, "t", "flow", None, b"x" * 100) for i in range(1000)])
        jobs = await consumer.next_jobs(1.0)
        outcome = await consumer.ack([(j.record.id, j.record.lease) for j in jobs])
        consumer.release(outcome)
        done += len(jobs)
    consumer.close(clean=True)
    await engine.stop()
    store.close()


async def measure(path: str) -> float:
    store = RocksStore(path)
    started = time.perf_counter()
    engine = Engine(store, EngineConfig(durable=False))
    await engine.start(services=False)
    await engine.wait_rebuilt()
    elapsed = time.perf_counter() - started
    await engine.stop()
    store.close()
    return elapsed


def step(*args: str) -> str:
    return subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready", type=int, default=1_000_000)
    parser.add_argument("--flowed", type=int, default=5_000_000)
    parser.add_argument("--step", nargs="+")
    args = parser.parse_args()
    if args.step:
        kind, path, *rest = args.step
        if kind == "fill":
            asyncio.run(fill(path, int(rest[0]), rest[1]))
        elif kind == "flow":
            asyncio.run(flow(path, int(rest[0])))
        else:
            print(asyncio.run(measure(path)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        fresh, flowed = str(Path(tmp) / "fresh"), str(Path(tmp) / "flowed")
        step("--step", "fill", fresh, str(args.ready), "backlog")
        fresh_s = min(float(step("--step", "measure", fresh)) for _ in range(3))
        step("--step", "fill", flowed, str(args.ready), "backlog")
        started = time.perf_counter()
        step("--step", "flow", flowed, str(args.flowed))
        flow_s = time.perf_counter() - started
        flowed_s = min(float(step("--step", "measure", flowed)) for _ in range(3))
        print(
            json.dumps(
                {
                    "ready_jobs": args.ready,
                    "flowed_jobs": args.flowed,
                    "startup_fresh_s": round(fresh_s, 2),
                    "startup_after_flow_s": round(flowed_s, 2),
                    "ratio": round(flowed_s / fresh_s, 2),
                    "flow_seconds": round(flow_s, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
