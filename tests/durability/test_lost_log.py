"""A write-ahead log that is deleted or cut is found, not served around: the durable mark beside
each store says how far acknowledged commits went, the server refuses a store that ends before
it, `pyqueue check` says so, `pyqueue repair` accepts the loss explicitly, and `pyqueue backup`
(while serving) and `pyqueue restore` bring every acknowledged job back."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import ServerProcess, check_store, serve_once

import pyqueue
from pyqueue.store.durable_mark import MARK_FILE


def _pyqueue(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyqueue", *args], capture_output=True, text=True, timeout=timeout
    )


def _fill(server: ServerProcess, jobs: int = 2000) -> None:
    with pyqueue.Client(server.address) as client:
        for _ in range(jobs // 500):
            client.enqueue_many([{"type": "t", "payload": b"x" * 200}] * 500)


def _marked(store: Path, timeout: float = 30) -> int:
    """The durable mark, once the server has written one (it does within a second of commits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int(json.loads((store / MARK_FILE).read_text())["sequence"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    raise AssertionError(f"no durable mark in {store}")


def test_a_deleted_log_is_refused_and_check_says_so(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    _fill(server)
    first = _marked(server.data_dir)
    deadline = time.monotonic() + 30  # the mark covers the last commits within a second
    while _marked(server.data_dir) == first and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()  # the jobs are in the log, not yet in table files (a clean stop flushes them)
    logs = [log for log in server.data_dir.glob("*.log") if log.stat().st_size]
    assert logs, "the jobs are in the log"
    for log in logs:
        log.unlink()
    refused = serve_once(server.data_dir, "--shards", "1")
    assert refused.returncode != 0
    assert "lost acknowledged commits" in refused.stderr and "write-ahead log" in refused.stderr, (
        refused.stderr
    )
    checked = check_store(server.data_dir)
    assert checked.returncode != 0 and "lost acknowledged commits" in checked.stderr
    # Accepting the loss is an explicit step: repair moves the mark down, then the store serves.
    repaired = _pyqueue("repair", "--data-dir", str(server.data_dir), "--yes")
    assert repaired.returncode == 0 and "lost for good" in repaired.stdout, repaired.stdout + repaired.stderr
    server.start()
    try:
        with pyqueue.Client(server.address) as client:
            assert client.count_jobs() == 0, "the lost jobs are lost, and said to be"
    finally:
        server.close()


@pytest.mark.parametrize("shards", [1, 2])
def test_a_backup_taken_while_serving_restores_every_acknowledged_job(tmp_path: Path, shards: int) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", str(shards)).start()
    try:
        with pyqueue.Client(server.address) as client:
            ids = {j.id for j in client.enqueue_many([{"type": "t", "queue": f"q{i}"} for i in range(200)])}
            made = _pyqueue("--address", server.address, "backup", str(tmp_path / "backup"))
            assert made.returncode == 0 and "backed up" in made.stdout, made.stdout + made.stderr
            again = _pyqueue("--address", server.address, "backup", str(tmp_path / "backup"))
            assert again.returncode != 0 and "exists already" in again.stderr
            relative = _pyqueue("--address", server.address, "backup", "")
            assert relative.returncode != 0
            client.enqueue("after", queue="q0")  # not in the backup
        assert server.stop() == 0, "".join(server.lines[-40:])
    finally:
        server.close()
    for lost in (tmp_path / "data").iterdir():  # the disk is replaced: an empty data dir
        subprocess.run(["rm", "-rf", str(lost)], check=True)
    assert serve_once(tmp_path / "data", "--shards", str(shards)).returncode != 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "CURRENT").write_text("a store\n")
    refused = _pyqueue("restore", str(tmp_path / "backup"), "--data-dir", str(tmp_path / "other"))
    assert refused.returncode != 0 and "--replace" in refused.stderr
    replaced = _pyqueue(
        "restore", str(tmp_path / "backup"), "--data-dir", str(tmp_path / "other"), "--replace"
    )
    assert replaced.returncode == 0 and list(tmp_path.glob("other.before-restore-*")), (
        "moved aside, not deleted"
    )
    restored = _pyqueue("restore", str(tmp_path / "backup"), "--data-dir", str(tmp_path / "data"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert check_store(tmp_path / "data").returncode == 0
    server.start()
    try:
        with pyqueue.Client(server.address) as client:
            listed = {j.id for j in client.list_jobs()}
            assert listed == ids, "every job acknowledged before the backup, and nothing else"
    finally:
        server.close()
