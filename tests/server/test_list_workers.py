"""ListWorkers and `pyqueue workers`: every connected worker stream, on every shard, with what it
holds and when it last acked."""

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness import ServerProcess

import pyqueue


def workers_cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyqueue", "--address", server.address, "workers", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_a_stream_shows_who_it_is_and_what_it_holds(client: pyqueue.Client, server: ServerProcess) -> None:
    assert client.workers() == []
    assert "no worker is connected" in workers_cli(server).stdout
    client.enqueue_many([{"type": "t"}] * 3)
    with client.take("default", prefetch=3) as stream:
        first = stream.next(timeout=30)  # started: the client reports starts
        assert first is not None
        first.ack()
        second = stream.next(timeout=30, confirm_start=True)
        assert second is not None
        # Its start is on the wire; the server reads it on its own time.
        (worker,) = _wait_for_workers(client, 1, lambda w: (w.in_flight, w.running) == (2, 1))
        assert (worker.host, worker.pid) == (socket.gethostname(), os.getpid())
        assert (worker.queues, worker.prefetch) == (["default"], 3)
        assert (worker.in_flight, worker.running, worker.acked, worker.failed) == (2, 1, 1, 0)
        assert worker.last_ack_at is not None and worker.last_ack_at >= worker.connected_at
        (shown,) = json.loads(workers_cli(server, "--json").stdout)
        assert (shown["pid"], shown["in_flight"], shown["acked"]) == (os.getpid(), 2, 1)
        assert "default" in workers_cli(server).stdout
    assert client.workers() == [], "a closed stream is gone from the list"


def test_every_shard_is_listed_through_the_public_address(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            topology = client.topology()
            assert topology is not None
            # Two queues owned by different shards: one stream to each.
            names = [f"q{i}" for i in range(50)]
            by_shard = {topology.shard_of_queue(n): n for n in names}
            assert len(by_shard) == 2
            with client.take(list(by_shard.values()), prefetch=1):
                listed = _wait_for_workers(client, 2)
                assert sorted(w.shard for w in listed) == [0, 1]
                assert sorted(q for w in listed for q in w.queues) == sorted(by_shard.values())
    finally:
        server.close()


def test_pyqueue_worker_names_itself_by_its_app(
    client: pyqueue.Client, server: ServerProcess, tmp_path: Path
) -> None:
    app_dir = Path(__file__).parent.parent / "app"
    env = {**os.environ, "PYQUEUE_ADDRESS": server.address, "SAMPLE_LOG": str(tmp_path / "ran.log")}
    worker = subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "sample_app:app", "--concurrency", "2"],
        cwd=app_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        (listed,) = _wait_for_workers(client, 1)
        assert (listed.name, listed.pid, listed.prefetch) == ("pyqueue worker sample_app:app", worker.pid, 8)
    finally:
        worker.terminate()
        worker.wait(60)


def _wait_for_workers(
    client: pyqueue.Client,
    n: int,
    condition: Callable[[pyqueue.WorkerInfo], bool] = lambda w: True,
    timeout: float = 30,
) -> list[pyqueue.WorkerInfo]:
    """Streams open, and their messages are read, asynchronously: wait until the server lists `n`
    workers that meet `condition`."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.workers()
        if sum(1 for w in found if condition(w)) >= n:
            return found
        assert time.monotonic() < deadline, f"not {n} such workers in {found}"
        time.sleep(0.05)
