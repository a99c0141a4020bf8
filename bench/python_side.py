"""What a Python team sees: enqueue from many threads, and `pyqueue worker` end to end.

    python bench/python_side.py [--jobs 20000] [--celery]

1. 64 threads each calling fn.enqueue(...) one job at a time, with the client's batching on and off.
2. `pyqueue worker --concurrency 16` draining N queued no-op jobs: sync handlers, then async ones.
3. With --celery: the same drain on Celery 5 with Redis (appendonly yes, appendfsync everysec),
   `celery worker -P threads -c 16`, acks late. Needs redis-server and celery installed.
All figures: jobs/s, fsync commit mode for pyqueue, one machine, one run.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps")]

import noop_app  # noqa: E402
from harness import PYQUEUE_ROOT, ServerProcess  # noqa: E402

import pyqueue  # noqa: E402


def threads_enqueue(address: str, batching: bool, n_threads: int = 64, seconds: float = 5.0) -> float:
    app = pyqueue.App(address, batching=batching)
    job = pyqueue.JobFunction(app, noop_app.noop.fn, "noop_app.noop", noop_app.noop.defaults)
    stop = threading.Event()
    counts = [0] * n_threads

    def call(i: int) -> None:
        while not stop.is_set():
            job.enqueue()
            counts[i] += 1

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n_threads)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    app.close()
    return sum(counts) / elapsed


def drain_with_worker(address: str, kind: str, jobs: int) -> float:
    with pyqueue.Client(address) as client:
        for start in range(0, jobs, 1000):
            client.enqueue_many(
                [{"type": f"noop_app.{kind}", "payload": {"args": [], "kwargs": {}}, "queue": "bench"}]
                * min(1000, jobs - start)
            )
        env = {
            **os.environ,
            "PYQUEUE_ADDRESS": address,
            "PYTHONPATH": os.pathsep.join([str(HERE / "apps"), str(PYQUEUE_ROOT)]),
        }
        started = time.perf_counter()
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyqueue",
                "worker",
                noop_app.target(kind),
                "--concurrency",
                "16",
                "--log-level",
                "warning",
            ],
            env=env,
            cwd=HERE / "apps",
        )
        try:
            while client.count_jobs(queue="bench") > 0:
                time.sleep(0.02)
            return jobs / (time.perf_counter() - started)
        finally:
            worker.terminate()
            worker.wait(30)


def celery_drain(jobs: int) -> float:
    port = "6390"
    with tempfile.TemporaryDirectory() as tmp:
        redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                port,
                "--bind",
                "127.0.0.1",
                "--dir",
                tmp,
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            import redis as redis_py

            conn = redis_py.Redis(port=int(port))
            for _ in range(100):
                try:
                    conn.ping()
                    break
                except redis_py.ConnectionError:
                    time.sleep(0.05)
            import celery_app

            for _ in range(jobs):
                celery_app.noop.delay()
            started = time.perf_counter()
            worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "celery_app",
                    "worker",
                    "-P",
                    "threads",
                    "-c",
                    "16",
                    "--loglevel",
                    "warning",
                ],
                cwd=HERE / "apps",
                env={**os.environ, "PYTHONPATH": str(HERE / "apps")},
            )
            try:
                while conn.llen("celery") > 0 or int(conn.info("clients")["connected_clients"]) < 2:
                    time.sleep(0.02)
                # Queued messages are gone; wait for the unacked ones (prefetched) to finish.
                while conn.hlen("unacked") > 0:
                    time.sleep(0.02)
                return jobs / (time.perf_counter() - started)
            finally:
                worker.terminate()
                worker.wait(30)
        finally:
            redis.terminate()
            redis.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--celery", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {"commit_mode": "fsync", "jobs": args.jobs}
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data").start()
        try:
            results["64_threads_enqueue_batched_jobs_per_s"] = round(threads_enqueue(server.address, True))
            results["64_threads_enqueue_unbatched_jobs_per_s"] = round(threads_enqueue(server.address, False))
            with pyqueue.Client(server.address) as client:
                client.delete_jobs(queue="bench")
            results["worker_16_sync_noop_jobs_per_s"] = round(
                drain_with_worker(server.address, "noop", args.jobs)
            )
            results["worker_16_async_noop_jobs_per_s"] = round(
                drain_with_worker(server.address, "anoop", args.jobs)
            )
        finally:
            server.stop()
    if args.celery:
        if shutil.which("redis-server") is None or importlib.util.find_spec("celery") is None:
            raise SystemExit(
                "--celery needs redis-server (apt install redis-server) and celery (pip install celery[redis])"
            )
        results["celery_redis_16_threads_noop_jobs_per_s"] = round(celery_drain(args.jobs))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
