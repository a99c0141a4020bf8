"""How evenly a queue's jobs spread over several `pyqueue worker` processes at an everyday rate.

    python bench/worker_share.py [--workers 2] [--rate 300] [--seconds 10] [--shards 1]

N `pyqueue worker noop_app:app` processes (defaults: concurrency 10, prefetch 40) on one queue;
one producer enqueues single no-op jobs at `--rate` a second (sequential calls, paced), fsync
commit mode. At the end, each worker's share of the acks (from `client.workers()`), and the
smallest share against an even one (1.0 is perfectly even).
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

from harness import PYQUEUE_ROOT, ServerProcess  # noqa: E402

import pyqueue  # noqa: E402
from pyqueue.client.steering import per_process  # noqa: E402


def run(address: str, workers: int, rate: float, seconds: float) -> dict[str, object]:
    env = {**os.environ, "PYQUEUE_ADDRESS": address, "PYTHONPATH": f"{HERE / 'apps'}:{PYQUEUE_ROOT}"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pyqueue", "worker", "noop_app:app"],
            cwd=HERE / "apps",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        with pyqueue.Client(address) as client:
            while len(per_process(client.workers())) < workers:  # every worker has its stream
                time.sleep(0.05)
            spec = {"args": [], "kwargs": {}}
            total = int(rate * seconds)
            start = time.monotonic()
            for i in range(total):
                client.enqueue("noop_app.noop", spec, queue="bench")
                ahead = start + (i + 1) / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            while client.count_jobs(queue="bench") and time.monotonic() - start < seconds + 60:
                time.sleep(0.05)
            acked = sorted((w.acked for w in per_process(client.workers())), reverse=True)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    shares = [round(a / max(sum(acked), 1), 3) for a in acked]
    return {
        "workers": workers,
        "jobs": sum(acked),
        "shares": shares,
        "evenness": round(min(shares) * workers, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=300)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--shards", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", "--shards", str(args.shards)).start()
        try:
            print(json.dumps(run(server.address, args.workers, args.rate, args.seconds)))
        finally:
            server.close()


if __name__ == "__main__":
    main()
