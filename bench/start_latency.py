"""Enqueue to start at a steady rate: one producer calls `fn.enqueue()` once per job, paced, while
`pyqueue worker` runs; each handler stamps when it starts. p50/p90/p99/max in ms, and the rate
the producer held.

    python bench/start_latency.py [--rate 500] [--seconds 10] [--kind def|async] [--workers 1]
                                  [--shards 2] [--commit-mode fsync|buffered] [--history N]

What the peer harness's `lat` phase measures (it runs 2 workers), in seconds instead of minutes.
Clocks: both stamps are time.time() on this machine. The warm-up (the first 50 jobs, or 10 per
worker if more) is left out. `--history N` first puts N jobs through the same workers (queued in
batches, then run), as a server that has been up a while has: latency should not grow with it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps")]

from harness import PYQUEUE_ROOT, ServerProcess  # noqa: E402


def stamps(path: Path, skip: int = 0) -> list[tuple[float, float]]:
    import latency_app

    raw = path.read_bytes()[skip * latency_app.STAMP.size :] if path.exists() else b""
    return list(latency_app.STAMP.iter_unpack(raw))


def measure(address: str, args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    import latency_app

    app, job = (
        (latency_app.async_app, latency_app.astamp)
        if args.kind == "async"
        else (latency_app.app, latency_app.stamp)
    )
    app.address = address
    path = tmp / "stamps.bin"
    env = {
        **os.environ,
        "PYQUEUE_ADDRESS": address,
        "PYQUEUE_BENCH_STAMPS": str(path),
        "PYTHONPATH": os.pathsep.join([str(HERE / "apps"), str(PYQUEUE_ROOT)]),
    }
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyqueue",
                "worker",
                f"latency_app:{'async_app' if args.kind == 'async' else 'app'}",
                "--log-level",
                "warning",
            ],
            env=env,
            cwd=HERE / "apps",
        )
        for _ in range(args.workers)
    ]
    try:
        warm = 0
        deadline = time.monotonic() + 60
        while len(stamps(path)) < max(50, 10 * args.workers) and time.monotonic() < deadline:
            job.enqueue(time.time())
            warm += 1
            time.sleep(0.01)
        while len(stamps(path)) < warm and time.monotonic() < deadline:
            time.sleep(0.01)
        for start in range(0, args.history, 1000):
            job.enqueue_many([(time.time(),)] * min(1000, args.history - start))
        deadline = time.monotonic() + 60 + args.history / 1000
        while len(stamps(path)) < warm + args.history and time.monotonic() < deadline:
            time.sleep(0.05)
        skip = len(stamps(path))
        sent = 0
        started = time.perf_counter()
        while (now := time.perf_counter()) - started < args.seconds:
            wait = started + sent / args.rate - now
            if wait > 0:
                time.sleep(wait)
            job.enqueue(time.time())
            sent += 1
        held = sent / (time.perf_counter() - started)
        deadline = time.monotonic() + 30
        while len(stamps(path, skip)) < sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(60)
    latencies = sorted((begun - enqueued) * 1000 for enqueued, begun in stamps(path, skip))
    if not latencies:
        raise SystemExit(f"none of the {sent} jobs started within 30 s: is the worker running?")

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p))], 2)

    return {
        "rate_held": round(held),
        "sent": sent,
        "started": len(latencies),
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "max_ms": round(latencies[-1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=500.0, help="jobs/s the producer aims at")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--kind", default="def", choices=["def", "async"])
    parser.add_argument("--workers", type=int, default=1, help="`pyqueue worker` processes")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--commit-mode", default="fsync", choices=["fsync", "buffered"])
    parser.add_argument("--history", type=int, default=0, help="jobs run before measuring")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            Path(tmp) / "data", "--shards", str(args.shards), "--commit-mode", args.commit_mode
        ).start()
        try:
            result = measure(server.address, args, Path(tmp))
        finally:
            server.stop()
    print(
        json.dumps(
            {
                "handler": "async def" if args.kind == "async" else "def",
                "rate": args.rate,
                "seconds": args.seconds,
                "workers": args.workers,
                "shards": args.shards,
                "commit_mode": args.commit_mode,
                "history": args.history,
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()
