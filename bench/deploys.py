"""Rolling deploys as users do them: five 30-second jobs waiting, `pyqueue worker --concurrency 1
--grace 1` started, SIGTERMed once its first job runs, three times. Prints each job's status,
attempts and lost count after the deploys.

    python bench/deploys.py [DEPLOYS]
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "app"))

from harness import ServerProcess  # noqa: E402

import pyqueue  # noqa: E402


def wait_lines(log: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise SystemExit(f"the worker did not start job {n} within {timeout}s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data").start()
        log = Path(tmp) / "ran.log"
        env = {**os.environ, "PYQUEUE_ADDRESS": server.address, "SAMPLE_LOG": str(log)}
        try:
            with pyqueue.Client(server.address) as client:
                ids = [
                    client.enqueue("sample_app.linger", {"args": [30], "kwargs": {}}, queue="work").id
                    for _ in range(5)
                ]
                deploys = int(sys.argv[1]) if len(sys.argv) > 1 else 3
                for deploy in range(1, deploys + 1):
                    worker = subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "pyqueue",
                            "worker",
                            "sample_app:app",
                            "--concurrency",
                            "1",
                            "--grace",
                            "1",
                        ],
                        cwd=ROOT / "tests" / "app",
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    wait_lines(log, deploy)
                    worker.send_signal(signal.SIGTERM)
                    worker.wait(60)
                deadline = time.monotonic() + 30  # the server hands back as the stream ends
                while (jobs := [client.get_job(i) for i in ids]) and any(
                    j.status == "in_flight" for j in jobs
                ):
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                print(
                    json.dumps(
                        {
                            "dead": sum(j.status == "dead" for j in jobs),
                            "jobs": [
                                {
                                    "status": j.status,
                                    "attempts": j.attempts,
                                    "lost": j.lost,
                                    "errors": j.errors,
                                }
                                for j in jobs
                            ],
                        }
                    )
                )
        finally:
            server.close()


if __name__ == "__main__":
    main()
