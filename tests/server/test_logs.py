"""What `pyqueue serve` says while it runs: a summary line per period, JSON lines on request, and
a refused log level that lists the valid ones."""

import json
import sys
from pathlib import Path

from harness import ServerProcess, serve_once

import pyqueue


def test_an_unknown_log_level_is_refused_with_the_valid_ones(tmp_path: Path) -> None:
    refused = serve_once(tmp_path / "data", "--log-level", "loud")
    assert refused.returncode == 2
    assert "'loud' is not one of 'debug', 'info', 'warning', 'error', 'critical'" in refused.stderr


def test_json_lines_and_a_summary_of_what_waits(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--log-format", "json", "--summary-every", "0.2").start()
    try:
        with pyqueue.Client(server.address) as client:
            client.enqueue_many([{"type": "t"}] * 3)
            with client.take("default", prefetch=1) as stream:
                assert stream.next(timeout=30) is not None
                # A state, not a delta: it holds in whichever period the enqueue fell.
                line = server.wait_for("now ready 2, scheduled 0, in flight 1, dead 0; workers 1")
        entry = json.loads(line)
        assert entry["level"] == "INFO" and entry["logger"] == "pyqueue.server"
        assert entry["message"].startswith("last ")
        assert all(json.loads(x)["message"] for x in server.lines), "every line is one JSON object"
    finally:
        server.close()


def test_the_worker_takes_the_same_log_options(server: ServerProcess) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "pyqueue", "worker", "no_such_module:app", "--log-level", "loud"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "'loud' is not one of" in done.stderr
