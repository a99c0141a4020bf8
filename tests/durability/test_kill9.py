"""kill -9 the server at random moments under steady load, restart, continue; then check the history
and compare the rebuilt in-memory sets with a full scan of the store.

PYQUEUE_CRASH_CYCLES sets the number of cycles (10 by default, as in CI)."""

import os
import random
import time

import pytest
from harness import ServerProcess, check_store
from history import History, Load

CYCLES = int(os.environ.get("PYQUEUE_CRASH_CYCLES", "10"))
PER_CYCLE = 15  # enqueues acknowledged by each restarted server before its kill: every cycle is under load


@pytest.mark.timeout(120 + 20 * CYCLES)
@pytest.mark.parametrize("shards", [1, 2])
def test_kill9_cycles_lose_nothing_acknowledged(tmp_path, shards: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(int(os.environ.get("PYQUEUE_CRASH_SEED", "7")))
    server = ServerProcess(tmp_path / "data", "--shards", str(shards)).start()
    history = History()
    # With shards, the queues spread over them; the supervisor's SIGKILL takes its shards down too.
    load = Load(history, server.address, queues=tuple(f"q{i}" for i in range(4)))
    load.start()
    try:
        for _ in range(CYCLES):
            # Waited for, not slept: on a loaded machine a restart can take the whole of a fixed pause.
            history.wait_for_more_acknowledged(PER_CYCLE)
            time.sleep(rng.uniform(0.2, 0.8))  # a random moment under load
            killed_at = time.monotonic()
            server.kill()
            server.restart()
            history.crashes.append((killed_at, time.monotonic()))
        load.drain()
        verdict = history.verdict()
        print(f"\nkill -9 cycles: {CYCLES}, shards: {shards}, history: {verdict}")
        assert verdict["acknowledged"] >= PER_CYCLE * CYCLES, verdict
        assert verdict["lost"] == 0, verdict
        assert verdict["unexpected"] == 0, verdict
        assert verdict["delivered_after_ack"] == 0, verdict
        assert verdict["unexplained_duplicates"] == 0, verdict
    finally:
        load.stop_producing.set()
        load.stop_consuming.set()
        server.close()
    out = check_store(server.data_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok:" in out.stdout
