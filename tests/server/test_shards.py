"""Queues sharded across server processes, behind one address."""

import os
import queue
import signal
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import grpc
import pytest
from harness import ServerProcess, queue_on, serve_once

import pyqueue
from pyqueue.cluster import Topology, shard_of_job
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


@pytest.fixture
def sharded(tmp_path):  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "4").start()
    yield server
    server.close()


def shard_pids(server: ServerProcess) -> list[int]:
    assert server.proc is not None
    out = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_100_queues_over_4_shards_keep_order_within_each_queue(sharded: ServerProcess) -> None:
    queues = [f"q{i}" for i in range(100)]
    with pyqueue.Client(sharded.address) as client:
        assert client.topology() is not None and client.topology().shards == 4
        expected: dict[str, list[int]] = defaultdict(list)
        spec = []
        for n in range(6):
            for q in queues:
                spec.append({"type": "t", "queue": q, "priority": 10 if n % 3 == 0 else 20, "payload": n})
        jobs = client.enqueue_many(spec)
        assert {shard_of_job(j.id) for j in jobs} == {0, 1, 2, 3}
        for job in sorted(jobs, key=lambda j: (j.priority, j.id)):
            expected[job.queue].append(job.id)
        delivered: dict[str, list[int]] = defaultdict(list)
        with client.take(queues, prefetch=50) as stream:
            for _ in range(len(jobs)):
                taken = stream.next(timeout=10)
                assert taken is not None
                delivered[taken.queue].append(taken.id)
                stream.ack(taken).result(10)
        assert delivered == expected
        assert client.count_jobs() == 0


def test_listing_counting_and_queues_merge_across_shards(sharded: ServerProcess) -> None:
    with pyqueue.Client(sharded.address) as client:
        ids = [j.id for j in client.enqueue_many([{"type": "t", "queue": f"q{i % 10}"} for i in range(40)])]
        assert [j.id for j in client.list_jobs(page_size=7)] == sorted(ids)
        assert [j.id for j in client.list_jobs(page_size=6, descending=True)] == sorted(ids, reverse=True)
        first, cursor, _ = client.list_page(limit=15)
        second, _, back = client.list_page(limit=15, cursor=cursor)
        assert [j.id for j in first + second] == sorted(ids)[:30]
        assert [j.id for j in client.list_page(limit=15, cursor=back)[0]] == sorted(ids)[:15]
        assert client.count_jobs() == 40 and client.count_jobs(queue="q3") == 4
        assert {q.name: q.counts["ready"] for q in client.queues()} == {f"q{i}": 4 for i in range(10)}
        assert len(client.delete_jobs(queues=["q1", "q2"]).changed) == 8
        assert client.count_jobs(status="ready") == 32


def test_a_plain_grpc_client_uses_the_public_address(sharded: ServerProcess) -> None:
    channel = grpc.insecure_channel(sharded.address)
    stub = pb_grpc.QueueStub(channel)
    topology = Topology.from_pb(stub.GetTopology(pb.TopologyRequest(), timeout=10))
    far = next(f"queue{i}" for i in range(100) if topology.shard_of_queue(f"queue{i}") == 3)
    job_id = stub.Enqueue(pb.EnqueueRequest(jobs=[pb.NewJob(type="t", queue=far)]), timeout=10).jobs[0].id
    assert shard_of_job(job_id) == 3
    assert stub.GetJob(pb.GetJobRequest(id=job_id), timeout=10).queue == far
    responses = stub.Take(
        iter([pb.TakeRequest(subscribe=pb.Subscribe(queues=[far], prefetch=1))]), timeout=10
    )
    first = next(r for r in responses if r.WhichOneof("kind") == "jobs")
    assert first.jobs.jobs[0].id == job_id
    responses.cancel()
    near = next(f"queue{i}" for i in range(100) if topology.shard_of_queue(f"queue{i}") == 0)
    # Across shards, the router fans out: one Enqueue, one Take, one Ack for both jobs.
    both = stub.Enqueue(
        pb.EnqueueRequest(jobs=[pb.NewJob(type="t", queue=far), pb.NewJob(type="t", queue=near)]), timeout=10
    ).jobs
    assert [shard_of_job(e.id) for e in both] == [3, 0], "answered in the request's order"
    outbox: queue.Queue[pb.TakeRequest | None] = queue.Queue()
    outbox.put(pb.TakeRequest(subscribe=pb.Subscribe(queues=[far, near], prefetch=3)))
    responses = stub.Take(iter(outbox.get, None), timeout=30)
    expected = {job_id, *(e.id for e in both)}  # the first job came back when its stream ended
    taken: list[pb.Job] = []
    acked: list[int] = []
    for response in responses:
        taken += response.jobs.jobs
        acked += response.ack_result.acked
        if len(taken) == 2 and not acked:  # one from each shard: one Ack for both
            assert {shard_of_job(j.id) for j in taken} == {0, 3}
            outbox.put(pb.TakeRequest(ack=pb.Ack(ids=[j.id for j in taken], leases=[j.lease for j in taken])))
        if len(taken) == 3 and len(acked) == 2:
            outbox.put(pb.TakeRequest(ack=pb.Ack(ids=[taken[2].id], leases=[taken[2].lease])))
        if len(acked) == 3:
            break
    assert sorted(acked) == sorted(expected) == sorted(j.id for j in taken)
    outbox.put(None)
    responses.cancel()
    with pytest.raises(grpc.RpcError) as info:  # a shard refuses a queue it does not own
        pb_grpc.QueueStub(grpc.insecure_channel(topology.addresses[0])).Enqueue(
            pb.EnqueueRequest(jobs=[pb.NewJob(type="t", queue=far)]), timeout=10
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "belongs to shard 3" in (
        info.value.details() or ""
    )
    channel.close()


def test_a_killed_shard_is_restarted_and_the_others_keep_serving(sharded: ServerProcess) -> None:
    with pyqueue.Client(sharded.address) as client:
        topology = client.topology()
        assert topology is not None
        by_shard = {
            s: next(f"q{i}" for i in range(200) if topology.shard_of_queue(f"q{i}") == s) for s in range(4)
        }
        victim_queue, other_queue = by_shard[1], by_shard[0]
        held = [j.id for j in client.enqueue_many([{"type": "t", "queue": victim_queue}] * 3)]
        stream = client.take(victim_queue, prefetch=3)
        assert {stream.next(timeout=10).id for _ in range(3)} == set(held)  # type: ignore[union-attr]

        errors: list[Exception] = []
        served = [0]
        stop = threading.Event()

        def keep_enqueuing() -> None:
            with pyqueue.Client(sharded.address) as c:
                while not stop.is_set():
                    try:
                        c.enqueue("t", queue=other_queue)
                        served[0] += 1
                    except Exception as exc:
                        errors.append(exc)

        def served_more(n: int) -> bool:
            target = served[0] + n
            deadline = time.monotonic() + 60
            while served[0] < target and not errors and time.monotonic() < deadline:
                time.sleep(0.01)
            return served[0] >= target

        loader = threading.Thread(target=keep_enqueuing)
        loader.start()
        assert served_more(1)
        victim = next(p for p in shard_pids(sharded) if "shard-1" in Path(f"/proc/{p}/cmdline").read_text())
        os.kill(victim, signal.SIGKILL)
        sharded.wait_for("shard 1 exited")
        assert served_more(5), "the other shards keep serving through the kill"
        sharded.wait_for("shard 1 is back on")
        assert served_more(5), "and after it is back"
        stop.set()
        loader.join(10)
        assert errors == []
        with pyqueue.Client(sharded.address) as fresh, fresh.take(victim_queue, prefetch=3) as again:
            recovered = {again.next(timeout=10).id for _ in range(3)}  # type: ignore[union-attr]
        assert recovered == set(held), "the restarted shard recovers its in-flight jobs"


def test_a_shard_restarted_on_another_port_is_followed_by_the_topology(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import socket

    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    assert server.proc is not None
    squatter = socket.socket()  # no SO_REUSEPORT: grpc cannot bind beside it
    # SO_REUSEADDR: the stopped supervisor's relay holds connections to the shard, which linger
    # (FIN_WAIT) after the kill until it runs again; they must not keep the squatter out.
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        with pyqueue.Client(server.address) as client:
            topology = client.topology()
            assert topology is not None
            queue = next(f"q{i}" for i in range(200) if topology.shard_of_queue(f"q{i}") == 1)
            job = client.enqueue("t", queue=queue)
        old_port = int(topology.addresses[1].rsplit(":", 1)[1])
        # Hold the supervisor still, kill shard 1, take its port, and let the supervisor go on.
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            victim = next(
                p for p in shard_pids(server) if "shard-1" in Path(f"/proc/{p}/cmdline").read_text()
            )
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while True:  # the port is free once the kernel has closed the killed shard's sockets
                try:
                    squatter.bind(("127.0.0.1", old_port))
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"port {old_port} never came free"
                    time.sleep(0.01)
            squatter.listen()
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        line = server.wait_for("shard 1 is back on")
        assert f":{old_port}" not in line, "".join(server.lines)
        with pyqueue.Client(server.address) as fresh:
            assert fresh.topology() is not None and fresh.topology().addresses[1] != topology.addresses[1]
            assert fresh.get_job(job.id).status == "ready"  # straight to the shard, at its new address
            with fresh.take(queue, prefetch=1) as stream:
                got = stream.next(timeout=30)
                assert got is not None and got.id == job.id
            assert fresh.count_jobs(queue=queue) == 1  # and through the router
    finally:
        squatter.close()
        server.close()


def test_changing_the_shard_count_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    server.stop()
    again = serve_once(tmp_path / "data", "--shards", "3")
    assert again.returncode != 0 and "start it with --shards 2" in again.stderr


def test_sigterm_stops_every_shard_cleanly(sharded: ServerProcess) -> None:
    children = shard_pids(sharded)
    assert len(children) == 4
    assert sharded.stop() == 0
    assert sum("stopped cleanly" in line for line in sharded.lines) == 5
    for pid in children:
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "zombie" in status.read_text().lower()


def test_the_asyncio_client_takes_across_shards(sharded: ServerProcess) -> None:
    import asyncio

    async def run() -> tuple[set[int], set[int], int]:
        async with pyqueue.AsyncClient(sharded.address) as client:
            topology = await client.topology()
            assert topology is not None
            queues = [
                next(f"a{i}" for i in range(200) if topology.shard_of_queue(f"a{i}") == s) for s in range(4)
            ]
            jobs = await client.enqueue_many([{"type": "t", "queue": q} for q in queues for _ in range(3)])
            got: set[int] = set()
            async with client.take(queues, prefetch=4) as stream:
                while len(got) < len(jobs):
                    job = await stream.next(timeout=10)
                    assert job is not None
                    got.add(job.id)
                    await stream.ack(job)
            return {j.id for j in jobs}, got, await client.count_jobs()

    enqueued, taken, left = asyncio.run(run())
    assert taken == enqueued and {shard_of_job(i) for i in taken} == {0, 1, 2, 3} and left == 0


def test_bulk_changes_by_id_report_each_ids_true_outcome(sharded: ServerProcess) -> None:
    with pyqueue.Client(sharded.address) as client:
        jobs = client.enqueue_many([{"type": "t", "queue": f"q{i}"} for i in range(8)])
        ids = [j.id for j in jobs]
        assert len({shard_of_job(i) for i in ids}) > 1
        updated = client.update_jobs({"priority": 7}, ids=ids[:4])
        assert sorted(updated.changed) == sorted(ids[:4]) and updated.rejected == []
        missing = ids[0] + (1 << 40)  # an id on a shard that has no such job
        deleted = client.delete_jobs(ids=[*ids[4:], missing])
        assert sorted(deleted.changed) == sorted(ids[4:])
        assert [(r.id, r.code) for r in deleted.rejected] == [(missing, "NOT_FOUND")]


def test_the_cli_deletes_by_filter_across_shards_and_exits_0(sharded: ServerProcess) -> None:
    with pyqueue.Client(sharded.address) as client:
        client.enqueue_many([{"type": "t", "queue": f"q{i}"} for i in range(12)])
    out = subprocess.run(
        [*sharded.command, "--address", sharded.address, "delete", "--status", "ready", "--yes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "12 changed, 0 refused" in out.stdout
    with pyqueue.Client(sharded.address) as client:
        assert client.count_jobs() == 0


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"slots": 1024}'])
def test_a_damaged_cluster_file_is_a_clear_error(tmp_path: Path, damage: bytes) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    server.stop()
    (tmp_path / "data" / "cluster.json").write_bytes(damage)
    again = serve_once(tmp_path / "data", "--shards", "2")
    assert again.returncode != 0
    assert "cluster.json is damaged" in again.stderr and '{"shards": 2, "slots": 1024}' in again.stderr
    assert "Traceback" not in again.stderr


def test_moving_jobs_to_a_queue_of_another_shard_is_refused(sharded: ServerProcess) -> None:
    with pyqueue.Client(sharded.address) as client:
        topology = client.topology()
        assert topology is not None
        here = "mail"
        there = next(
            f"q{i}" for i in range(200) if topology.shard_of_queue(f"q{i}") != topology.shard_of_queue(here)
        )
        same = next(
            f"q{i}"
            for i in range(200)
            if f"q{i}" != here and topology.shard_of_queue(f"q{i}") == topology.shard_of_queue(here)
        )
        job_id = client.enqueue("t", queue=here).id
        with pytest.raises(pyqueue.FailedPrecondition, match="move between queues of one shard"):
            client.update_jobs({"queue": there}, queue=here)
        assert client.get_job(job_id).queue == here, "nothing moved"
        client.update_jobs({"queue": same}, queue=here)
        assert client.get_job(job_id).queue == same
        assert client.count_jobs(queue=same) == 1


def test_a_second_supervisor_on_the_same_data_dir_is_refused(sharded: ServerProcess) -> None:
    topology = (sharded.data_dir / "topology.json").read_bytes()
    again = serve_once(sharded.data_dir, "--shards", "4")
    assert again.returncode != 0
    assert "is served by another pyqueue serve (pid" in again.stderr and "Traceback" not in again.stderr
    assert (sharded.data_dir / "topology.json").read_bytes() == topology, "the live topology is untouched"


def test_unique_keys_hold_per_queue_on_every_shard(tmp_path: Path) -> None:
    """A key holds within its queue, and a queue lives on one shard: what the docs promise holds
    on any number of shards (across queues, keys were per shard only)."""
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address) as client:
            topology = client.topology()
            assert topology is not None
            q0, q1 = queue_on(topology, 0), queue_on(topology, 1)
            first = {q: client.enqueue("t", queue=q, unique_key="order-42") for q in (q0, q1)}
            assert not any(j.duplicate for j in first.values())
            for q in (q0, q1):
                again = client.enqueue("t", queue=q, unique_key="order-42")
                assert again.duplicate and again.id == first[q].id
                assert client.get_job(again.id).unique_in_queue
    finally:
        server.close()


def test_the_router_refuses_what_a_shard_refuses(tmp_path: Path) -> None:
    """A Take over 257 queues, refused by one shard, is refused by the router too (it split them
    into streams of fewer per shard); a hand-back's flags survive the split."""
    from pyqueue.server.fan_out import split

    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        stub = pb_grpc.QueueStub(grpc.insecure_channel(server.address))
        requests = iter(
            [pb.TakeRequest(subscribe=pb.Subscribe(queues=[f"q{i}" for i in range(257)], prefetch=1))]
        )
        with pytest.raises(grpc.RpcError) as refused:
            next(iter(stub.Take(requests, timeout=30)))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "257 queues on one stream; the limit is 256" in (refused.value.details() or "")
    finally:
        server.close()
    release = pb.TakeRequest(
        release=pb.Release(ids=[1 << 8, 1], leases=[1, 1], delay_ms=5, unknown_type=True)
    )
    parts = split(release, lambda job_id: job_id & 0xFF, [0, 1])
    assert all(p.release.unknown_type and p.release.delay_ms == 5 for p in parts.values())
