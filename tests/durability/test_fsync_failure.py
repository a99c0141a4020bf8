"""An fsync that fails: nothing is acknowledged after it, the server exits at once (fail-stop,
never retrying the fsync), and after a restart everything acknowledged before it is there."""

import threading
import time

import pytest
from harness import ServerProcess

import pyqueue


def test_failed_fsync_stops_the_server_without_acknowledging(tmp_path) -> None:  # type: ignore[no-untyped-def]
    trigger = tmp_path / "fail-fsync-now"
    server = ServerProcess(tmp_path / "data", env={"PYQUEUE_FAILPOINT_SYNC_ERROR": str(trigger)}).start()
    try:
        # failover_s=0: an enqueue that finds the server gone is not sent again for a failover's
        # budget (30 s), which would outlast the joins below on a slow machine.
        with pyqueue.Client(server.address, timeout=5, failover_s=0) as client:
            before = [j.id for j in client.enqueue_many([{"type": "t", "payload": i} for i in range(50)])]
            trigger.touch()
            acknowledged_after: list[int] = []
            errors: list[Exception] = []

            def enqueue_one(i: int) -> None:
                try:
                    acknowledged_after.append(client.enqueue("t", i).id)
                except pyqueue.PyQueueError as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=enqueue_one, args=(i,)) for i in range(8)]
            failed_at = time.monotonic()
            for t in threads:
                t.start()
            assert server.proc is not None
            code = server.proc.wait(timeout=5)
            exited_after = time.monotonic() - failed_at
            for t in threads:
                t.join(10)
        assert acknowledged_after == [], "an enqueue was acknowledged after the failed fsync"
        assert len(errors) == 8
        assert code == 70
        assert exited_after < 1.0, f"the server took {exited_after:.2f}s to stop"
        assert any("fsync failed" in line for line in server.lines)

        server.env = {}
        server.restart()
        with pyqueue.Client(server.address) as client:
            for job_id in before:
                assert client.get_job(job_id).status == "ready"
    finally:
        server.close()


@pytest.mark.parametrize("mode", ["fsync", "buffered"])
def test_commit_mode_is_reported(tmp_path, mode: str) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--commit-mode", mode).start()
    try:
        assert f"commit mode {mode}" in server.wait_for("listening on")
    finally:
        server.close()
