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

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests"), str(Path(__file__).resolve().parent)]

import pyqueue  # noqa: E402


def produce(address: str, jobs: int, batch: int, payload_size: int, queues: list[str]) -> None:
    """Batches of `batch` jobs, each batch to the next queue in turn (so every shard gets its share)."""
    payload = b"x" * payload_size
    with pyqueue.Client(address) as client:
        for n, start in enumerate(range(0, jobs, batch)):
            queue = queues[n % len(queues)]
            client.enqueue_many(
                [{"type": "bench", "payload": payload, "queue": queue}] * min(batch, jobs - start)
            )


def consume(address: str, jobs: int, prefetch: int, queues: list[str], done: "mp.Queue[float]") -> None:
    with pyqueue.Client(address) as client, client.take(queues, prefetch=prefetch) as stream:
        pending = []
        for _ in range(jobs):
            job = stream.next(timeout=60)
            if job is None:
                raise SystemExit("the consumer ran dry")
            pending.append(stream.ack(job))
        for future in pending:
            future.result(60)
    done.put(time.perf_counter())


def list_forever(address: str, queue: str, stop: "mp.Event", listed: "mp.Value") -> None:  # type: ignore[valid-type]
    """A client listing jobs in a loop (first page of a queue, ready jobs) beside the load."""
    with pyqueue.Client(address) as client:
        while not stop.is_set():  # type: ignore[attr-defined]
            client.list_page(queue=queue, status="ready", limit=50)
            listed.value += 1  # type: ignore[attr-defined]


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
            target=produce, args=(address, per_producer, args.batch, args.payload, queues[i:] + queues[:i])
        )
        for i in range(args.producers)
    ]
    stop_listing, listed = ctx.Event(), ctx.Value("i", 0)
    lister = ctx.Process(target=list_forever, args=(address, queues[0], stop_listing, listed))
    for p in consumers:
        p.start()
    if args.lister:
        lister.start()
    time.sleep(1.0)  # let the consumers subscribe before the clock starts
    started = time.perf_counter()
    for p in producers:
        p.start()
    ends = [done.get(timeout=600) for _ in consumers]
    for p in producers + consumers:
        p.join(60)
    elapsed = max(ends) - started
    if args.lister:
        stop_listing.set()
        lister.join(30)
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
        "lister": bool(args.lister),
        "listings": listed.value if args.lister else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--address")
    parser.add_argument(
        "--commit-mode",
        default="fsync",
        choices=["fsync", "buffered", "both"],
        help="both: buffered then fsync in one run, and their ratio",
    )
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--prefetch", type=int, default=2000)
    parser.add_argument("--queues", type=int, default=1)
    parser.add_argument("--lister", action="store_true", help="a client lists jobs in a loop beside the load")
    parser.add_argument("--compare-lister", action="store_true", help="run without, then with the lister")
    parser.add_argument(
        "--shards", default="1", help="shard counts to run, e.g. 1,2,4 (one server each, in one run)"
    )
    args = parser.parse_args()
    if args.address:
        print(json.dumps(run(args.address, args)))
        return
    from harness import ServerProcess
    from single_enqueue import cpu_seconds

    runs: list[tuple[str, bool, int]]
    shard_counts = [int(n) for n in args.shards.split(",")]
    if args.compare_lister:
        runs = [(args.commit_mode, False, shard_counts[0]), (args.commit_mode, True, shard_counts[0])]
    elif args.commit_mode == "both":
        runs = [("buffered", args.lister, shard_counts[0]), ("fsync", args.lister, shard_counts[0])]
    else:
        runs = [(args.commit_mode, args.lister, n) for n in shard_counts]
    results = {}
    for mode, lister, shards in runs:
        args.commit_mode, args.lister = mode, lister
        with tempfile.TemporaryDirectory() as tmp:
            extra = ["--shards", str(shards)] if shards > 1 else []
            server = ServerProcess(Path(tmp) / "data", "--commit-mode", mode, *extra)
            server.start()
            try:
                assert server.proc is not None
                cpu_before = cpu_seconds(server.proc.pid)
                result = run(server.address, args)
                result["shards"] = shards
                # the server's processes, over the whole run (its second of waiting included)
                spent = cpu_seconds(server.proc.pid) - cpu_before
                result["server_cpu_us_per_job"] = round(spent * 1e6 / result["jobs"])  # type: ignore[operator]
                results[f"{mode}{'+lister' if lister else ''}{f'/{shards}shards' if shards > 1 else ''}"] = (
                    result
                )
                print(json.dumps(result))
            finally:
                server.stop()
    if len(results) >= 2:
        (name_a, a), *others = results.items()
        for name_b, b in others:
            ratio = b["jobs_per_s"] / a["jobs_per_s"]  # type: ignore[operator]
            print(json.dumps({f"{name_b}_over_{name_a}": round(ratio, 2)}))


if __name__ == "__main__":
    main()
