"""Periodic jobs kept by the server: a one-second entry declared by two workers gives one job per
second, across a kill -9 of the server in the middle, with no tick doubled and one catch-up job
for the downtime that says what was missed. And `pyqueue cron` lists, pauses, resumes, deletes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import ServerProcess

import pyqueue

HERE = Path(__file__).parent


def start_worker(server: ServerProcess) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, "-m", "pyqueue", "worker", "cron_app:app"],
        cwd=HERE,
        env={**os.environ, "PYQUEUE_ADDRESS": server.address},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def beats(client: pyqueue.Client) -> list[pyqueue.Job]:
    return sorted(client.list_jobs(queue="cron"), key=lambda j: int(j.headers["pyqueue-cron-tick"]))


def wait_for_beats(client: pyqueue.Client, n: int, after_ms: int = 0, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (
        sum(
            1
            for j in beats(client)
            if int(j.headers["pyqueue-cron-tick"]) > after_ms and j.status == "completed"
        )
        < n
    ):
        assert time.monotonic() < deadline, f"fewer than {n} beats ran"
        time.sleep(0.1)


@pytest.mark.timeout(180)
def test_one_job_per_tick_across_a_kill_9_with_two_workers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--keep-completed", "3600").start()
    workers = [start_worker(server), start_worker(server)]
    try:
        with pyqueue.Client(server.address) as client:
            wait_for_beats(client, 3)
        server.kill()
        server.proc.wait()  # type: ignore[union-attr]
        down_at_ms = int(time.time() * 1000)
        time.sleep(2.5)  # the downtime itself: ticks are missed while the server is gone
        server.restart()
        with pyqueue.Client(server.address) as client:
            wait_for_beats(client, 3, after_ms=down_at_ms)
            jobs = beats(client)
    finally:
        for worker in workers:
            worker.terminate()
        outputs = [worker.communicate(timeout=60)[0] for worker in workers]
        server.close()
    assert all("declared 1 periodic jobs: beat" in out for out in outputs), outputs
    assert all("declared the limits of cron: max 1 running" in out for out in outputs), outputs
    ticks = [int(j.headers["pyqueue-cron-tick"]) for j in jobs]
    assert len(ticks) == len(set(ticks)), f"a tick was enqueued twice: {ticks}"
    assert all(t % 1000 == 0 for t in ticks)
    gaps = [(b - a, job) for a, b, job in zip(ticks, ticks[1:], jobs[1:], strict=False)]
    long = [(gap, job) for gap, job in gaps if gap != 1000]
    assert len(long) == 1, f"one gap, the downtime: {gaps}"
    gap, catch_up = long[0]
    assert catch_up.headers["pyqueue-cron-missed"] == str(gap // 1000 - 1)
    assert all("pyqueue-cron-missed" not in j.headers for j in jobs if j is not catch_up)


def test_the_cron_command_lists_pauses_resumes_and_deletes(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    def run(*args: str, ok: bool = True) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pyqueue", "--address", server.address, "cron", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode == 0) == ok, done.stdout + done.stderr
        return done.stdout + done.stderr

    client.set_cron(
        [
            {
                "name": "nightly",
                "schedule": "0 3 * * *",
                "timezone": "Europe/Paris",
                "job": {"type": "report", "queue": "reports"},
            }
        ]
    )
    assert "nightly" in run()
    (entry,) = json.loads(run("--json"))
    assert (entry["schedule"], entry["timezone"], entry["type"], entry["queue"]) == (
        "0 3 * * *",
        "Europe/Paris",
        "report",
        "reports",
    )
    assert "paused" in run("pause", "nightly") and client.cron_entries()[0].paused
    assert "resumed" in run("resume", "nightly") and not client.cron_entries()[0].paused
    assert client.cron_entries()[0].next_run is not None
    assert "deleted" in run("delete", "nightly") and client.cron_entries() == []
    assert "no periodic job named 'nightly'" in run("pause", "nightly", ok=False)


@pytest.mark.timeout(120)
def test_a_sharded_server_keeps_each_entry_on_its_queues_shard(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            shard_of = {name: client.topology().shard_of_queue(name) for name in "abcdefgh"}
            queues = [next(q for q, s in shard_of.items() if s == shard) for shard in (0, 1)]
            client.set_cron(
                [
                    {"name": f"every-{q}", "schedule": "* * * * * *", "job": {"type": "t", "queue": q}}
                    for q in queues
                ]
            )
            assert [e.name for e in client.cron_entries()] == sorted(f"every-{q}" for q in queues)
            for q in queues:
                deadline = time.monotonic() + 30
                while client.count_jobs(queue=q) < 2:  # each shard enqueues its own entry's ticks
                    assert time.monotonic() < deadline, f"no ticks on queue {q}"
                    time.sleep(0.1)
            assert client.pause_cron(f"every-{queues[1]}").paused
            with pytest.raises(pyqueue.errors.NotFound):
                client.delete_cron("nobody")
    finally:
        server.close()


def test_a_schedule_that_never_fires_is_refused_and_a_stored_one_is_skipped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    every_second = {"name": "beat", "schedule": "* * * * * *", "job": {"type": "beat", "queue": "ops"}}
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            client.set_cron([every_second])
            for schedule, timezone in (
                ("0 0 30 2 *", "UTC"),
                ("* * * * *", "Europe"),
                ("* * * * *", "x" * 10_000),
            ):
                with pytest.raises(pyqueue.InvalidArgument):
                    client.set_cron(
                        [{"name": "bad", "schedule": schedule, "timezone": timezone, "job": {"type": "t"}}]
                    )
            assert [e.name for e in client.cron_entries()] == ["beat"], "a refusal stores nothing"
        assert server.stop() == 0
        # An entry stored by an older server that let February 30 in.
        damage = (
            "import sys; from pyqueue.store import RocksStore; from pyqueue.store.contract import Family\n"
            "from pyqueue.engine.cron_entry import CronEntry; from pyqueue.engine.model import NewJob\n"
            "entry = CronEntry('feb30', '0 0 30 2 *', 'UTC', NewJob('t', 'ops', 32768, b'', ''), created_ms=1)\n"
            "store = RocksStore(sys.argv[1]); batch = store.batch()\n"
            "batch.put(Family.DATA, entry.key, entry.encode()); store.write(batch); store.sync(); store.close()\n"
        )
        subprocess.run([sys.executable, "-c", damage, str(server.data_dir)], check=True, timeout=60)
        server.start()
        with pyqueue.Client(server.address) as client:
            before = client.count_jobs(queue="ops")
            deadline = time.monotonic() + 30
            while client.count_jobs(queue="ops") < before + 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert client.count_jobs(queue="ops") >= before + 2, "the every-second entry keeps firing"
            entries = {e.name: e for e in client.cron_entries()}
            assert "cannot be computed" in entries["feb30"].problem and entries["feb30"].next_run is None
            assert entries["beat"].problem == "" and entries["beat"].next_run is not None
        server.wait_for("periodic job feb30 is skipped")
        listed = subprocess.run(
            [sys.executable, "-m", "pyqueue", "--address", server.address, "cron"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert listed.returncode == 0 and "skipped" in listed.stdout, listed.stdout + listed.stderr
    finally:
        server.close()
