"""How late the server enqueues periodic jobs: a one-second entry, for `--seconds` (600 by default).

    python bench/cron_drift.py [--seconds 600]

Starts its own server (1 shard, fsync) and declares one entry, "* * * * * *". For each tick's
job, the drift is its creation time less its tick (both from the server's clock, in ms). Prints
the ticks expected and enqueued, the duplicates (must be 0), and the drift's median, p99 and max.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from harness import ServerProcess  # noqa: E402

import pyqueue  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data").start()
        try:
            with pyqueue.Client(server.address) as client:
                client.set_cron(
                    [{"name": "beat", "schedule": "* * * * * *", "job": {"type": "beat", "queue": "beat"}}]
                )
                started = time.time()
                time.sleep(args.seconds)  # the measurement is the server's behaviour over this time
                client.pause_cron("beat")
                jobs = list(client.list_jobs(queue="beat"))
        finally:
            server.close()
    ticks = [int(j.headers["pyqueue-cron-tick"]) for j in jobs]
    drift = sorted(int(j.created_at.timestamp() * 1000) - int(j.headers["pyqueue-cron-tick"]) for j in jobs)
    print(
        json.dumps(
            {
                "seconds": args.seconds,
                "ticks_expected_about": args.seconds,
                "ticks_enqueued": len(ticks),
                "duplicates": len(ticks) - len(set(ticks)),
                "catch_ups": sum(1 for j in jobs if "pyqueue-cron-missed" in j.headers),
                "drift_ms_median": statistics.median(drift),
                "drift_ms_p99": drift[int(len(drift) * 0.99) - 1],
                "drift_ms_max": drift[-1],
                "started_at": started,
            }
        )
    )


if __name__ == "__main__":
    main()
