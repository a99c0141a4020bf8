"""Many concurrent callers, one job per Enqueue call: jobs/s and jobs per fsync (group commit).

python bench/enqueue_callers.py [--callers 64] [--seconds 10] [--commit-mode fsync]
                                [--no-native-front]
"""

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import ServerProcess

import pyqueue


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--commit-mode", default="fsync", choices=["fsync", "buffered"])
    parser.add_argument("--no-native-front", action="store_true", help="enqueues by grpcio only")
    args = parser.parse_args()
    front = ["--no-native-front"] if args.no_native_front else []
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", "--commit-mode", args.commit_mode, *front).start()
        stop = threading.Event()
        counts = [0] * args.callers

        def call(n: int) -> None:
            with pyqueue.Client(server.address) as client:
                while not stop.is_set():
                    client.enqueue("bench", b"x" * 100)
                    counts[n] += 1

        threads = [threading.Thread(target=call, args=(n,)) for n in range(args.callers)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join(30)
        elapsed = time.perf_counter() - started
        server.stop()
        line = server.wait_for("stats:")
        syncs = int(re.search(r"syncs=(\d+)", line).group(1))  # type: ignore[union-attr]
        enqueued = int(re.search(r"enqueued=(\d+)", line).group(1))  # type: ignore[union-attr]
        print(
            json.dumps(
                {
                    "callers": args.callers,
                    "commit_mode": args.commit_mode,
                    "native_front": not args.no_native_front,
                    "seconds": round(elapsed, 1),
                    "jobs": sum(counts),
                    "jobs_per_s": round(sum(counts) / elapsed),
                    "fsyncs": syncs,
                    "jobs_per_fsync": round(enqueued / max(syncs, 1), 1),
                }
            )
        )


if __name__ == "__main__":
    main()
