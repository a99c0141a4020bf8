"""Fair share by key, measured on a real server: one tenant's backlog beside another's trickle,
and the shares of many keys and of weighted keys.

    python bench/fair_share.py [--part backlog|shares|all] [--backlog 1000000] [--seconds 20]
                               [--workers 4]

backlog: tenant A has `--backlog` ready no-op jobs on queue "fair" (written by the engine
in-process in a child process, buffered, to build them quickly); then a real `pyqueue serve
--shards 1` (fsync) on that store, `--workers` `pyqueue worker fair_app:app` processes (their
defaults), and tenant B enqueuing one job every 10 ms for `--seconds`. Reported: B's enqueue to
start (p50/p99/max, ms; both stamps time.time() on this machine), how many of B's jobs started
within the window, and A's jobs done per second over the window. Run twice, in one session:
with fair keys (A "a", B "b") and without (neither has a key: one FIFO).

shares: 10,000 keys with 100 jobs each, written key after key (a FIFO would give the first
100,000 starts to the first 1,000 keys); the first 100,000 starts taken by one Take stream
(prefetch 100) and each key's share of them against an even 10. Then keys w1, w2, w4 with
weights 1, 2 and 4 and 100,000 jobs each: their shares of the first 70,000 starts.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps")]

from harness import PYQUEUE_ROOT, ServerProcess  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.client.steering import per_process  # noqa: E402

BULK = json.dumps({"args": [0], "kwargs": {}}).encode()


async def fill(path: str, plan: list[tuple[str, int]]) -> None:
    """Write `plan`'s jobs in order: (fair key, count), "" for none."""
    from pyqueue.engine import Engine, EngineConfig
    from pyqueue.store import RocksStore

    store = RocksStore(path)
    engine = Engine(store, EngineConfig(durable=False))
    await engine.start()
    await engine.wait_rebuilt()
    batch = []
    for key, count in plan:
        for _ in range(count):
            job = engine.new_job(
                len(batch), "fair_app.bulk", "fair", None, BULK, "application/json", fair_key=key
            )
            batch.append(job)
            if len(batch) == 1000:
                await engine.enqueue(batch)
                batch = []
    if batch:
        await engine.enqueue(batch)
    await engine.stop()
    store.close()


def filled_server(tmp: Path, name: str, plan: list[tuple[str, int]]) -> ServerProcess:
    data, plan_file = tmp / name, tmp / f"{name}-plan.json"
    plan_file.write_text(json.dumps(plan))
    subprocess.run([sys.executable, __file__, "--fill", str(data), str(plan_file)], check=True)
    server = ServerProcess(data, "--shards", "1").start(timeout=600)
    server.wait_for("rebuilt the in-memory sets", timeout=1200)
    return server


def stamps(path: Path) -> list[tuple[float, float]]:
    import latency_app

    raw = path.read_bytes() if path.exists() else b""
    return list(latency_app.STAMP.iter_unpack(raw))


def backlog(tmp: Path, keyed: bool, jobs: int, seconds: float, workers: int) -> dict[str, object]:
    name = "keyed" if keyed else "plain"
    server = filled_server(tmp, name, [("a" if keyed else "", jobs)])
    path = tmp / f"{name}-stamps.bin"
    env = {
        **os.environ,
        "PYQUEUE_ADDRESS": server.address,
        "PYQUEUE_BENCH_STAMPS": str(path),
        "PYTHONPATH": os.pathsep.join([str(HERE / "apps"), str(PYQUEUE_ROOT)]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pyqueue", "worker", "fair_app:app", "--log-level", "warning"],
            env=env,
            cwd=HERE / "apps",
        )
        for _ in range(workers)
    ]
    try:
        with pyqueue.Client(server.address) as client:
            while len(per_process(client.workers())) < workers:
                time.sleep(0.05)
            time.sleep(2)  # every worker at its pace on A's backlog
            acked_before = sum(w.acked for w in per_process(client.workers()))
            sent = 0
            started = time.perf_counter()
            while (now := time.perf_counter()) - started < seconds:
                wait = started + sent * 0.01 - now
                if wait > 0:
                    time.sleep(wait)
                spec = {"args": [time.time()], "kwargs": {}}
                client.enqueue("fair_app.small", spec, queue="fair", fair_key="b" if keyed else None)
                sent += 1
            window = time.perf_counter() - started
            acked = sum(w.acked for w in per_process(client.workers())) - acked_before
            b_started = len(stamps(path))
            left = client.count_jobs(queue="fair")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
        server.close()
    waits = sorted((begun - enqueued) * 1000 for enqueued, begun in stamps(path))
    a_rate = (acked - b_started) / window
    result: dict[str, object] = {
        "fair_keys": keyed,
        "a_backlog": jobs,
        "b_sent": sent,
        "b_started_in_window": b_started,
        "a_jobs_per_s": round(a_rate),
        "jobs_left": left,
    }
    if waits:
        result |= {
            "b_p50_ms": round(statistics.median(waits), 2),
            "b_p99_ms": round(waits[min(len(waits) - 1, int(len(waits) * 0.99))], 2),
            "b_max_ms": round(waits[-1], 2),
        }
    if a_rate > 0:
        result["a_backlog_drain_s"] = round(left / a_rate)  # what B's next job waits without keys
    return result


def take_keys(server: ServerProcess, count: int) -> Counter[str]:
    seen: Counter[str] = Counter()
    with pyqueue.Client(server.address) as client, client.take(["fair"], prefetch=100) as stream:
        for _ in range(count):
            job = stream.next(timeout=60)
            assert job is not None
            seen[job.fair_key] += 1
            job.ack()
    return seen


def shares(tmp: Path) -> dict[str, object]:
    keys = 10_000
    server = filled_server(tmp, "many", [(f"k{k}", 100) for k in range(keys)])
    try:
        seen = take_keys(server, 100_000)
    finally:
        server.close()
    counts = [seen[f"k{k}"] for k in range(keys)]
    even = 100_000 / keys
    result: dict[str, object] = {
        "keys": keys,
        "starts": sum(counts),
        "share_min_vs_even": round(min(counts) / even, 3),
        "share_max_vs_even": round(max(counts) / even, 3),
        "keys_outside_10_percent": sum(1 for c in counts if abs(c - even) > 0.1 * even),
    }
    server = filled_server(tmp, "weighted", [("w1", 100_000), ("w2", 100_000), ("w4", 100_000)])
    try:
        with pyqueue.Client(server.address) as client:
            for key, weight in (("w2", 2), ("w4", 4)):
                client.set_fair_weight("fair", key, weight)
        seen = take_keys(server, 70_000)
    finally:
        server.close()
    result["weighted_starts"] = {key: seen[key] for key in ("w1", "w2", "w4")}
    result["weighted_vs_1_2_4"] = {
        key: round(seen[key] / (10_000 * w), 4) for key, w in (("w1", 1), ("w2", 2), ("w4", 4))
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", default="all", choices=["backlog", "shares", "all"])
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--fill", nargs=2)
    args = parser.parse_args()
    if args.fill:
        plan = json.loads(Path(args.fill[1]).read_text())
        asyncio.run(fill(args.fill[0], [(key, count) for key, count in plan]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("backlog", "all"):
            for keyed in (True, False):
                print(json.dumps(backlog(Path(tmp), keyed, args.backlog, args.seconds, args.workers)))
        if args.part in ("shares", "all"):
            print(json.dumps(shares(Path(tmp))))


if __name__ == "__main__":
    main()
