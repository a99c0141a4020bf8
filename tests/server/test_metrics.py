"""The HTTP port: Prometheus metrics that follow what jobs went through, one view across shards,
and /healthz."""

import time
import urllib.error
import urllib.request

import pytest
from harness import ServerProcess
from prometheus_client.parser import text_string_to_metric_families

import pyqueue


def scrape(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://{server.http_address}/metrics", timeout=30) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def get(server: ServerProcess, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{server.http_address}{path}", timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def q(queue: str, **more: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"queue": queue, **more}.items()))


def test_counters_gauges_and_histograms_follow_the_jobs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            for _ in range(3):
                client.enqueue("t", b"x", queue="mail", max_retries=0)
            client.enqueue("t", b"x", queue="idle")
            with client.take("mail", prefetch=3) as stream:
                first, second, third = (stream.next(timeout=30, confirm_start=True) for _ in range(3))
                assert first and second and third
                first.ack()
                second.fail("boom")  # no retries left: dead
                metrics = scrape(server)
                assert metrics["pyqueue_jobs_enqueued_total", q("mail")] == 3
                assert metrics["pyqueue_jobs_completed_total", q("mail")] == 1
                assert metrics["pyqueue_jobs_failed_total", q("mail")] == 1
                assert metrics["pyqueue_jobs_dead_total", q("mail")] == 1
                assert metrics["pyqueue_queue_jobs", q("mail", status="ready")] == 0
                assert metrics["pyqueue_queue_jobs", q("idle", status="ready")] == 1
                assert metrics["pyqueue_queue_jobs", q("mail", status="in_flight")] == 1
                assert metrics["pyqueue_queue_jobs", q("mail", status="dead")] == 1
                assert metrics["pyqueue_workers", q("mail")] == 1
                assert metrics["pyqueue_queue_oldest_ready_seconds", q("idle")] > 0
                assert metrics["pyqueue_job_wait_seconds_count", q("mail")] == 3
                assert metrics["pyqueue_enqueue_seconds_count", ()] == 4
                assert metrics["pyqueue_fsync_seconds_count", ()] >= 1
                assert metrics["pyqueue_commit_jobs_count", ()] >= 1
                assert metrics["pyqueue_store_bytes", ()] > 0
                assert ("pyqueue_store_pending_compaction_bytes", ()) in metrics
                third.release()
        assert get(server, "/healthz") == 200
        assert get(server, "/nothing") == 404
    finally:
        server.close()


def test_a_worker_that_vanishes_counts_as_lost(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            client.enqueue("t", b"x", queue="mail")
            stream = client.take("mail")
            job = stream.next(timeout=30, confirm_start=True)
            assert job is not None
            stream._call.cancel()  # type: ignore[attr-defined]  # the connection breaks, no goodbye
            deadline = time.monotonic() + 30
            while client.get_job(job.id).lost == 0:  # the server notices the broken stream
                assert time.monotonic() < deadline, "the vanished worker's attempt was never counted lost"
                time.sleep(0.05)
            assert scrape(server)["pyqueue_jobs_lost_total", q("mail")] == 1
    finally:
        server.close()


@pytest.mark.timeout(120)
def test_a_sharded_server_serves_one_view_of_every_shard(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            shards = {name: client.topology().shard_of_queue(name) for name in ("a", "b", "c", "d", "e", "f")}
            queues = [
                next(n for n, s in shards.items() if s == 0),
                next(n for n, s in shards.items() if s == 1),
            ]
            for queue in queues:
                client.enqueue_many([{"type": "t", "queue": queue} for _ in range(3)])
        metrics = scrape(server)
        for queue in queues:
            assert metrics["pyqueue_jobs_enqueued_total", q(queue)] == 3
            assert metrics["pyqueue_queue_jobs", q(queue, status="ready")] == 3
        assert metrics["pyqueue_enqueue_seconds_count", ()] == 2  # one call per shard, added up
        assert get(server, "/healthz") == 200
    finally:
        server.close()
