"""A damaged data dir is loud, never silent: the server refuses to start and says which file and
what to do; `pyqueue check` reports it and changes nothing; `pyqueue repair` is a separate step."""

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ServerProcess, check_store, pyqueue_command, serve_once

import pyqueue


def filled_then_killed(tmp_path: Path, jobs: int = 2000, batch: int = 500) -> ServerProcess:
    server = ServerProcess(tmp_path / "data").start()
    with pyqueue.Client(server.address) as client:
        for _ in range(jobs // batch):
            client.enqueue_many([{"type": "t", "payload": b"x" * 200}] * batch)
    server.kill()  # the jobs are in the write-ahead log, not yet in table files
    return server


def serve(server: ServerProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *server.command,
            "serve",
            "--data-dir",
            str(server.data_dir),
            "--listen",
            "127.0.0.1:0",
            "--shards",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def data_files(data_dir: Path) -> dict[str, bytes]:
    """The store's own files and their contents (RocksDB's diagnostic LOG files aside)."""
    return {
        p.name: p.read_bytes()
        for p in data_dir.iterdir()
        if p.suffix in (".log", ".sst") or p.name.startswith(("MANIFEST", "CURRENT", "OPTIONS"))
    }


def check(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return check_store(data_dir)


def test_a_corrupt_record_in_the_middle_of_the_log_refuses_the_start(tmp_path: Path) -> None:
    server = filled_then_killed(tmp_path)
    (wal,) = sorted(server.data_dir.glob("*.log"), key=lambda p: p.stat().st_size)[-1:]
    raw = bytearray(wal.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 8] = bytes(b ^ 0xFF for b in raw[middle : middle + 8])
    wal.write_bytes(bytes(raw))
    before = data_files(server.data_dir)
    started = serve(server)
    assert started.returncode != 0, "the server must not start with half its jobs"
    assert "is damaged and was not opened" in started.stderr and "pyqueue repair" in started.stderr
    assert "Traceback" not in started.stderr
    checked = check(server.data_dir)
    assert checked.returncode != 0 and "problem:" in checked.stderr
    assert data_files(server.data_dir) == before, "check and the refused start changed nothing"


def test_a_missing_current_file_is_reported_and_nothing_is_created(tmp_path: Path) -> None:
    server = filled_then_killed(tmp_path, jobs=500)
    (server.data_dir / "CURRENT").unlink()
    before = data_files(server.data_dir)
    checked = check(server.data_dir)
    assert checked.returncode != 0 and "CURRENT file is missing" in checked.stderr
    started = serve(server)
    assert started.returncode != 0 and "CURRENT file is missing" in started.stderr
    assert data_files(server.data_dir) == before, "no new store over the old files"


def test_repair_is_an_explicit_step_after_which_the_store_serves(tmp_path: Path) -> None:
    server = filled_then_killed(tmp_path, jobs=500, batch=50)
    (wal,) = server.data_dir.glob("*.log")
    raw = bytearray(wal.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    wal.write_bytes(bytes(raw))
    assert serve(server).returncode != 0
    repaired = subprocess.run(
        [sys.executable, "-m", "pyqueue", "repair", "--data-dir", str(server.data_dir), "--yes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert repaired.returncode == 0, repaired.stderr
    server.start()
    try:
        with pyqueue.Client(server.address) as client:
            assert 0 < client.count_jobs() < 500, "what could be read is back; the damaged batch is gone"
        server.stop()
        assert check(server.data_dir).returncode == 0
    finally:
        server.close()


def test_a_corrupt_table_block_fails_the_requests_that_read_it_not_the_server(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    with pyqueue.Client(server.address) as client:
        ids = [
            j.id
            for j in client.enqueue_many(
                [{"type": "t", "payload": bytes([i % 251]) * 4000} for i in range(500)]
            )
        ]
    server.stop()
    salvaged = pyqueue_command(
        "repair", "--data-dir", str(server.data_dir), "--yes"
    )  # flushes to table files
    assert salvaged.returncode == 0, salvaged.stderr
    biggest = max(server.data_dir.glob("*.sst"), key=lambda p: p.stat().st_size)
    raw = bytearray(biggest.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(b ^ 0xFF for b in raw[middle : middle + 64])
    biggest.write_bytes(bytes(raw))
    server.start()
    try:
        failed = 0
        with pyqueue.Client(server.address) as client:
            for job_id in ids:
                try:
                    client.get_job(job_id)
                except pyqueue.DataLoss as exc:  # naming the file, and what to run
                    assert "block checksum mismatch" in str(exc) and ".sst" in str(exc)
                    assert "pyqueue check" in str(exc)
                    failed += 1
            assert 0 < failed < len(ids), "the damaged block's jobs fail, the others are served"
            # A listing serves what is whole, and marks each job it cannot read where it stands.
            listed = list(client.list_jobs())
            assert [j.id for j in listed] == ids
            assert len([j for j in listed if j.damage]) == failed
            assert all("damaged block" in j.damage for j in listed if j.damage)
            taken = 0
            # One claim for every job: it meets the damaged block.
            with client.take("default", prefetch=len(ids)) as stream:
                while (job := stream.next(timeout=10)) is not None:
                    taken += 1
                    with contextlib.suppress(pyqueue.PyQueueError):  # the damaged block's jobs
                        job.ack()
            # A claim that meets the damaged block reads its jobs one by one: only the unreadable
            # ones are left out, every other job is delivered.
            assert taken == len(ids) - failed, "the stream goes on past the damaged block"
            assert client.enqueue("t").id
        assert server.proc is not None and server.proc.poll() is None, "the server is still up"
    finally:
        server.close()


def test_an_existing_empty_data_dir_is_refused_until_init(tmp_path: Path) -> None:
    """A volume that did not mount leaves its mount point: an empty dir. Starting there must not
    make a new, empty store that hides the lost one."""
    empty = tmp_path / "mnt"
    empty.mkdir()
    for shards in ("1", "2"):
        refused = serve_once(empty, "--shards", shards)
        assert refused.returncode != 0
        assert "exists but holds no pyqueue store" in refused.stderr + refused.stdout, refused.stderr
        assert "--init" in refused.stderr + refused.stdout
        assert [p.name for p in empty.iterdir() if p.name != "supervisor.lock"] == [], "nothing made"
    server = ServerProcess(empty, "--init").start()
    try:
        server.wait_for("created a new, empty store")
        with pyqueue.Client(server.address) as client:
            client.enqueue("t")
        assert server.stop() == 0
        server.args.remove("--init")  # from now on a plain start, and the store is there
        server.start()
        with pyqueue.Client(server.address) as client:
            assert client.count_jobs() == 1
    finally:
        server.close()


def test_a_shard_whose_store_is_gone_is_refused_by_name(tmp_path: Path) -> None:
    import shutil

    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    with pyqueue.Client(server.address) as client:
        client.enqueue_many([{"type": "t", "queue": f"q{i}"} for i in range(20)])
    assert server.stop() == 0
    shutil.rmtree(server.data_dir / "shard-1")
    (server.data_dir / "shard-1").mkdir()  # its volume's empty mount point
    refused = serve_once(server.data_dir, "--shards", "2")
    assert refused.returncode != 0
    assert "shard-1 holds no store" in refused.stderr + refused.stdout, refused.stderr
    assert not (server.data_dir / "shard-1" / "CURRENT").exists(), "nothing made"


def test_a_corrupt_job_record_is_a_marked_entry_and_check_reports_it(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    with pyqueue.Client(server.address) as client:
        jobs = [client.enqueue("t", {"n": i}, queue="mail") for i in range(5)]
    assert server.stop() == 0
    bad = jobs[2].id
    damage = (
        "import sys; from pyqueue.store import RocksStore, keys; from pyqueue.store.contract import Family\n"
        "store = RocksStore(sys.argv[1]); batch = store.batch()\n"
        "batch.put(Family.DATA, keys.job_key(int(sys.argv[2])), b'\\x07 not a record')\n"
        "store.write(batch); store.sync(); store.close()\n"
    )
    subprocess.run([sys.executable, "-c", damage, str(server.data_dir), str(bad)], check=True, timeout=60)
    checked = check(server.data_dir)
    assert checked.returncode != 0 and f"job {bad}: undecodable record" in checked.stdout + checked.stderr
    server.start()
    try:
        with pyqueue.Client(server.address) as client:
            for listing in (client.list_jobs(queues=["mail"]), client.list_jobs()):
                listed = list(listing)
                assert [j.id for j in listed] == [j.id for j in jobs], "every job, in its place"
                marked = [j for j in listed if j.damage]
                assert [j.id for j in marked] == [bad] and "undecodable record" in marked[0].damage
            with pytest.raises(pyqueue.DataLoss, match=f"job {bad}.*pyqueue check"):
                client.get_job(bad)
                assert [j.payload for j in listed if not j.damage] == [{"n": i} for i in (0, 1, 3, 4)]
            with client.take("mail", prefetch=10) as stream:  # the readable ones are delivered
                for _ in range(4):
                    job = stream.next(timeout=30)
                    assert job is not None and job.id != bad
                    stream.ack(job).result(30)
    finally:
        server.close()


def test_check_writes_nothing_and_works_on_a_read_only_mount(tmp_path: Path) -> None:
    import os

    server = ServerProcess(tmp_path / "data").start()
    with pyqueue.Client(server.address) as client:
        client.enqueue_many([{"type": "t"}] * 10)
    assert server.stop() == 0
    before = {p.name: p.stat().st_mtime_ns for p in server.data_dir.iterdir()}
    assert check(server.data_dir).returncode == 0
    assert {p.name: p.stat().st_mtime_ns for p in server.data_dir.iterdir()} == before, "check wrote nothing"
    if os.geteuid() != 0:
        return  # the read-only mount below needs root (CI is root)
    mount = tmp_path / "ro"
    mount.mkdir()
    subprocess.run(["mount", "--bind", str(server.data_dir), str(mount)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], check=True)
        checked = check(mount)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "10 jobs" in checked.stdout
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_repair_salvages_a_log_whose_damage_splits_a_batch(tmp_path: Path) -> None:
    """Batches of 500 jobs span several 32 KiB log blocks: damage in one of their middle fragments
    made RocksDB's own salvage join the pieces around it and fail ("Write batch content
    corrupted"), so repair could not help. Now every whole batch is kept and the store serves."""
    server = filled_then_killed(tmp_path)  # 2,000 jobs in 4 batches of 500, all in the log
    (wal,) = sorted(server.data_dir.glob("*.log"), key=lambda p: p.stat().st_size)[-1:]
    raw = bytearray(wal.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 8] = bytes(b ^ 0xFF for b in raw[middle : middle + 8])
    wal.write_bytes(bytes(raw))
    assert serve(server).returncode != 0, "damage refuses the start"
    repaired = subprocess.run(
        [sys.executable, "-m", "pyqueue", "repair", "--data-dir", str(server.data_dir), "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "whole write batches" in repaired.stdout and (server.data_dir / f"{wal.name}.damaged").exists()
    assert check(server.data_dir).returncode == 0
    server.start()
    try:
        with pyqueue.Client(server.address) as client:
            left = client.count_jobs()
            assert 1000 <= left < 2000 and left % 500 == 0, left  # whole batches, never half of one
    finally:
        server.close()
