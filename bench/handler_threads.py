"""What handing one sync call to a thread and its result back to the event loop costs, the way
`pyqueue worker` runs `def` handlers: its own HandlerThreads against asyncio's run_in_executor on a
ThreadPoolExecutor (what it used before). No server: only the hand-off, on uvloop.

    python bench/handler_threads.py [--calls 30000] [--concurrency 10] [--rounds 2]

`--concurrency` calls are in flight at once (the worker's slots); each call is a no-op. Prints CPU
and wall time per call for each, round by round, interleaved.
"""

import argparse
import asyncio
import contextvars
import functools
import json
import time
from concurrent.futures import ThreadPoolExecutor

import uvloop

from pyqueue.worker.threads import HandlerThreads


def noop() -> None:
    return None


async def measure(kind: str, calls: int, concurrency: int) -> dict[str, object]:
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(concurrency + 1000)
    threads = HandlerThreads(concurrency + 1000)
    slots = asyncio.Semaphore(concurrency)

    async def one() -> None:
        call = functools.partial(contextvars.copy_context().run, noop)
        if kind == "run_in_executor":
            await asyncio.shield(loop.run_in_executor(pool, call))
        else:
            await threads.call(loop, call)
        slots.release()

    cpu, wall = time.process_time(), time.perf_counter()
    tasks = []
    for _ in range(calls):
        await slots.acquire()
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    pool.shutdown()
    threads.shutdown()
    return {
        "kind": kind,
        "concurrency": concurrency,
        "cpu_us_per_call": round(cpu / calls * 1e6, 1),
        "wall_us_per_call": round(wall / calls * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.rounds):
        for kind in ("run_in_executor", "HandlerThreads"):
            print(json.dumps(uvloop.run(measure(kind, args.calls, args.concurrency))))


if __name__ == "__main__":
    main()
