"""/healthz on a sharded server means every shard answers a call, not that its process exists."""

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ServerProcess


@pytest.fixture
def two_shards(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    yield server
    server.close()


def healthz(server: ServerProcess) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{server.http_address}/healthz", timeout=30) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def shard_pid(server: ServerProcess, index: int) -> int:
    assert server.proc is not None
    children = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
    return next(
        int(p) for p in children.stdout.split() if f"shard-{index}" in Path(f"/proc/{p}/cmdline").read_text()
    )


def test_healthz_is_503_while_a_shard_does_not_answer(two_shards: ServerProcess) -> None:
    assert healthz(two_shards) == (200, "ok\n")
    victim = shard_pid(two_shards, 1)
    os.kill(victim, signal.SIGSTOP)  # its process exists, its port accepts, it answers nothing
    try:
        status, body = healthz(two_shards)
        assert status == 503
        assert "shard 1 does not answer" in body and "shard 0" not in body
    finally:
        os.kill(victim, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while healthz(two_shards)[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert healthz(two_shards) == (200, "ok\n")
