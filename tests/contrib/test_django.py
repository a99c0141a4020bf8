"""The Django backend under `pyqueue worker`: a real server, a real worker, a real sqlite database."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import ServerProcess

HERE = Path(__file__).resolve().parent


def test_each_job_starts_without_the_last_ones_connection(server: ServerProcess, tmp_path: Path) -> None:
    # One slot, so every job runs on the same thread: a connection kept open between jobs would
    # be found open by the next one (and one the database dropped would fail it).
    trace = tmp_path / "trace.txt"
    env = {
        **os.environ,
        "PYQUEUE_ADDRESS": server.address,
        "DJANGO_SETTINGS_MODULE": "django_site.settings",
        "SITE_DB": str(tmp_path / "site.sqlite3"),
        "SITE_TRACE": str(trace),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    enqueue = (
        "import django; django.setup(); from django_site.tasks import use_database as t; "
        "[t.enqueue(n) for n in range(3)]"
    )
    done = subprocess.run(
        [sys.executable, "-c", enqueue], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "pyqueue.contrib.django:app", "--concurrency", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the trace's lines are the positive marker
            if trace.exists() and len(trace.read_text().splitlines()) == 3:
                break
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
    lines = [line.split() for line in trace.read_text().splitlines()]
    assert len(lines) == 3, output
    assert sorted(int(n) for n, _, _ in lines) == [0, 1, 2]
    assert len({thread for _, _, thread in lines}) == 1  # one thread ran them all
    assert [found for _, found, _ in lines] == ["closed"] * 3, output
