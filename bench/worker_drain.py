"""`pyqueue worker` as a user runs it, draining queued no-op jobs: jobs/s and CPU per job.

    python bench/worker_drain.py [--jobs 30000] [--kind noop|anoop] [--processes 1] [--shards 2]
                                 [--concurrency N]

The jobs are queued first (batched), then one `pyqueue worker noop_app:app` (`async_app` for
`anoop`) starts with its
defaults (concurrency 10 for the `def` handler, 50 for the `async def` one, prefetch 4x;
`--processes N` for N worker processes). The clock runs
from the worker's start (its start-up included) to the last job gone; fsync commit mode. Besides
jobs/s: CPU and context switches per job on each side (the server's supervisor and shards; the
worker's processes), from /proc.
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
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE / "apps"), str(HERE)]

import noop_app  # noqa: E402
from harness import PYQUEUE_ROOT, ServerProcess  # noqa: E402
from single_enqueue import context_switches, cpu_seconds  # noqa: E402

import pyqueue  # noqa: E402


def drain(
    address: str, server_pid: int, jobs: int, kind: str, processes: int, concurrency: int | None
) -> dict[str, float]:
    with pyqueue.Client(address) as client:
        spec = {"type": f"noop_app.{kind}", "payload": {"args": [], "kwargs": {}}, "queue": "bench"}
        for start in range(0, jobs, 1000):
            client.enqueue_many([spec] * min(1000, jobs - start))
        env = {
            **os.environ,
            "PYQUEUE_ADDRESS": address,
            "PYTHONPATH": os.pathsep.join([str(HERE / "apps"), str(PYQUEUE_ROOT)]),
        }
        extra = ["--processes", str(processes)] if processes > 1 else []
        extra += ["--concurrency", str(concurrency)] if concurrency else []
        server_before = cpu_seconds(server_pid)
        switches_before = context_switches(server_pid)
        started = time.perf_counter()
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyqueue",
                "worker",
                noop_app.target(kind),
                "--log-level",
                "warning",
                *extra,
            ],
            env=env,
            cwd=HERE / "apps",
        )
        try:
            while client.count_jobs(queue="bench") > 0:
                time.sleep(0.02)
            elapsed = time.perf_counter() - started
            worker_cpu = cpu_seconds(worker.pid)
            worker_switches = context_switches(worker.pid)
            server_switches = context_switches(server_pid) - switches_before
        finally:
            worker.terminate()
            worker.wait(60)
        server_cpu = cpu_seconds(server_pid) - server_before
    return {
        "jobs_per_s": round(jobs / elapsed),
        "server_cpu_us_per_job": round(server_cpu / jobs * 1e6),
        "worker_cpu_us_per_job": round(worker_cpu / jobs * 1e6),
        "server_switches_per_job": round(server_switches / jobs, 2),
        "worker_switches_per_job": round(worker_switches / jobs, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--kind", default="noop", choices=["noop", "anoop"])
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=None, help="default: the worker's own")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", "--shards", str(args.shards)).start()
        try:
            assert server.proc is not None
            result = drain(
                server.address, server.proc.pid, args.jobs, args.kind, args.processes, args.concurrency
            )
        finally:
            server.stop()
    handler = "async def" if args.kind == "anoop" else "def"
    print(
        json.dumps(
            {
                "handler": handler,
                "processes": args.processes,
                "concurrency": args.concurrency
                or ("50 (default)" if args.kind == "anoop" else "10 (default)"),
                "shards": args.shards,
                "jobs": args.jobs,
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()
