"""Celery on pyqueue beside Celery on Redis, in one run (docs/celery.md).

    python bench/celery_broker.py [--jobs 5000] [--rounds 3]

The same Celery app (bench/apps/celery_broker_app.py: a no-op task that appends one line to a
file, results ignored, prefetch multiplier 4, acks on receipt: Celery's defaults) on two brokers:
Redis 7 (appendonly yes, appendfsync everysec), `pyqueue serve --shards 1` (fsync, its default) and
the same with `--commit-mode buffered` (written to the OS before the answer, fsync'd within a
moment: the nearest to Redis's everysec).
Rounds interleave the brokers. Per round and broker:
- enqueue: one sequential producer, `noop.delay(n)` for `--jobs` jobs: jobs/s;
- drain: the queued jobs, from the worker's "ready" line to the last run counted in the file, with
  `celery worker --pool=solo` (one process) and `--pool=prefork -c 2`: jobs/s.
Medians are printed as a markdown table, with every round's figures as JSON.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps")]

from harness import ProcessOutput, ServerProcess  # noqa: E402

REDIS_DURABILITY = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
BROKERS = ("redis", "pyqueue", "pyqueue-buffered")
POOLS = {"solo": ["--pool=solo"], "prefork2": ["--pool=prefork", "-c", "2"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(tmp: Path) -> tuple["subprocess.Popen[bytes]", str]:
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp), *REDIS_DURABILITY],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return redis, f"redis://127.0.0.1:{port}/0"
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def runs(path: Path) -> int:
    return path.stat().st_size // 9 if path.exists() else 0


def enqueue(broker: str, runs_file: Path, jobs: int) -> float:
    """In a fresh process (each broker's app module reads its URL at import)."""
    code = (
        "import sys, time; from celery_broker_app import noop\n"
        f"noop.delay(-1); t = time.perf_counter()\n"
        f"for n in range({jobs}): noop.delay(n)\n"
        "print(time.perf_counter() - t)"
    )
    env = {
        **os.environ,
        "CELERY_BROKER": broker,
        "BENCH_RUNS_FILE": str(runs_file),
        "PYTHONPATH": str(HERE / "apps"),
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return jobs / float(out.stdout.split()[-1])


def drain(broker: str, runs_file: Path, jobs: int, pool: list[str]) -> float:
    env = {
        **os.environ,
        "CELERY_BROKER": broker,
        "BENCH_RUNS_FILE": str(runs_file),
        "PYTHONPATH": str(HERE / "apps"),
    }
    cmd = [sys.executable, "-m", "celery", "-A", "celery_broker_app", "worker", "-Q", "bench", "-l", "info"]
    worker = subprocess.Popen(
        [*cmd, *pool, "--without-mingle", "--without-gossip"],
        env=env,
        cwd=HERE / "apps",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        ProcessOutput(worker).wait_lines("ready.", timeout=120)
        started = time.perf_counter()
        while runs(runs_file) < jobs and time.perf_counter() - started < 600:
            time.sleep(0.005)
        return jobs / (time.perf_counter() - started)
    finally:
        os.killpg(worker.pid, 9)
        worker.wait(30)


def median_of(figures: dict[str, list[float]], prefix: str) -> float:
    return statistics.median(v for k, vs in figures.items() if k.startswith(prefix) for v in vs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for round_ in range(args.rounds):
            for broker_name in BROKERS:
                for phase, pool in POOLS.items():
                    runs_file = root / f"runs-{broker_name}-{round_}-{phase}"
                    data = root / f"{broker_name}-{round_}-{phase}"
                    data.mkdir()
                    if broker_name == "redis":
                        server, url = start_redis(data)
                    else:
                        mode = "buffered" if broker_name == "pyqueue-buffered" else "fsync"
                        pq = ServerProcess(data / "data", "--commit-mode", mode).start()
                        url = f"pyqueue://{pq.address}"
                    try:
                        rate = enqueue(url, runs_file, args.jobs)
                        runs_file.unlink(missing_ok=True)  # the warm-up job's run, if any, is not counted
                        drained = drain(url, runs_file, args.jobs, pool)
                    finally:
                        if broker_name == "redis":
                            server.terminate()
                            server.wait(10)
                        else:
                            pq.close()
                    mine = figures.setdefault(broker_name, {})
                    mine.setdefault(f"enqueue ({phase} round)", []).append(rate)
                    mine.setdefault(f"drain {phase}", []).append(drained)
                    print(
                        json.dumps(
                            {
                                "round": round_,
                                "broker": broker_name,
                                "pool": phase,
                                "enqueue_jobs_per_s": round(rate),
                                "drain_jobs_per_s": round(drained),
                            }
                        ),
                        flush=True,
                    )
    print(f"\n{args.jobs} jobs per phase, {args.rounds} rounds, medians (jobs/s):\n")
    print("| | Celery on Redis (everysec) | on pyqueue (fsync) | on pyqueue (buffered) | fsync / Redis |")
    print("|---|---|---|---|---|")
    rows = {
        "enqueue, one sequential producer": "enqueue",
        "worker --pool=solo": "drain solo",
        "worker --pool=prefork -c 2": "drain prefork2",
    }
    for label, key in rows.items():
        r, p, b = (median_of(figures[broker], key) for broker in BROKERS)
        print(f"| {label} | {r:,.0f} | {p:,.0f} | {b:,.0f} | {p / r:.2f} |")


if __name__ == "__main__":
    main()
