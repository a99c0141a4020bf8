"""End-to-end load generator: batched enqueue, streamed take, batched acks; jobs/s for the full cycle.

    python bench/load.py                          # starts its own server (fsync) on a temp dir
    python bench/load.py --commit-mode buffered
    python bench/load.py --address HOST:PORT      # an already running server

Producers and consumers run in their own processes so the generator is not held to one core by
the GIL. The figure is jobs acked per second, from the first enqueue to the last ack confirmed.
"""

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pyqueue


def produce(address: str, jobs: int, batch: int, payload_size: int, queue: str) -> None:
    payload = b"x" * payload_size
    with pyqueue.Client(address) as client:
        for start in range(0, jobs, batch):
            n = min(batch, jobs - start)
            client.enqueue_many([{"type": "bench", "payload": payload, "queue": queue}] * n)


def consume(address: str, jobs: int, prefetch: int, queues: list[str], done: "mp.Queue[float]") -> None:
    with pyqueue.Client(address) as client, client.take(queues, prefetch=prefetch) as stream:
        pending = []
        for _ in range(jobs):
            job = stream.next(timeout=60)
            if job is None:
                raise SystemExit("the consumer ran dry")
            pending.append(stream.ack(job.id))
        for future in pending:
            future.result(60)
    done.put(time.perf_counter())


def run(address: str, args: argparse.Namespace) -> dict[str, object]:
    queues = [f"q{i}" for i in range(args.queues)]
    per_producer = args.jobs // args.producers
    per_consumer = args.jobs // args.consumers
    ctx = mp.get_context("spawn")
    done: mp.Queue[float] = ctx.Queue()
    consumers = [
        ctx.Process(target=consume, args=(address, per_consumer, args.prefetch, queues, done))
        for _ in range(args.consumers)
    ]
    producers = [
        ctx.Process(
            target=produce, args=(address, per_producer, args.batch, args.payload, queues[i % len(queues)])
        )
        for i in range(args.producers)
    ]
    for p in consumers:
        p.start()
    time.sleep(1.0)  # let the consumers subscribe before the clock starts
    started = time.perf_counter()
    for p in producers:
        p.start()
    ends = [done.get(timeout=600) for _ in consumers]
    for p in producers + consumers:
        p.join(60)
    elapsed = max(ends) - started
    return {
        "jobs": per_consumer * args.consumers,
        "seconds": round(elapsed, 2),
        "jobs_per_s": round(per_consumer * args.consumers / elapsed),
        "commit_mode": args.commit_mode,
        "payload_bytes": args.payload,
        "enqueue_batch": args.batch,
        "producers": args.producers,
        "consumers": args.consumers,
        "prefetch": args.prefetch,
        "queues": args.queues,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--address")
    parser.add_argument("--commit-mode", default="fsync", choices=["fsync", "buffered"])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--prefetch", type=int, default=2000)
    parser.add_argument("--queues", type=int, default=1)
    args = parser.parse_args()
    if args.address:
        print(json.dumps(run(args.address, args)))
        return
    from harness import ServerProcess

    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", "--commit-mode", args.commit_mode)
        server.start()
        try:
            print(json.dumps(run(server.address, args)))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
