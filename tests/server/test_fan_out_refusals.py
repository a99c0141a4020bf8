"""One call whose jobs span shards is all or nothing: every refusal a fan-out can meet (a right,
a bad field, a limit, a shard that does not answer) leaves every shard unchanged, through the
official client, the router (a plain gRPC client) and the HTTP API alike."""

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from auth_files import write_auth_file
from harness import ServerProcess, queue_on

import pyqueue
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

ALLOWED = "emails"  # the producer's grant covers emails only


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data", "--shards", "2", "--auth-file", str(tmp_path / "auth.toml")
    ).start()
    yield server, secrets
    server.close()


def _stored(server: ServerProcess, root: str) -> int:
    with pyqueue.Client(server.address, token=root) as client:
        return client.count_jobs()


def test_a_refusal_by_one_shard_changes_no_shard(secured: tuple[ServerProcess, dict[str, str]]) -> None:
    server, secrets = secured
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        topology = root.topology()
        assert topology is not None
        home = topology.shard_of_queue(ALLOWED)
        forbidden = queue_on(topology, 1 - home)
    mixed = [{"type": "t", "queue": ALLOWED}, {"type": "t", "queue": forbidden}]
    with (
        pyqueue.Client(server.address, token=secrets["producer"]) as producer,
        pytest.raises(pyqueue.PermissionDenied),
    ):
        producer.enqueue_many(mixed)
    bad_field: list[dict[str, object]] = [
        {"type": "t", "queue": ALLOWED},
        {"type": "t", "queue": forbidden, "priority": 70_000},
    ]
    over_limit: list[dict[str, object]] = [
        {"type": "t", "queue": ALLOWED},
        {"type": "t" * 500, "queue": forbidden},
    ]
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        for jobs in (bad_field, over_limit):
            with pytest.raises(pyqueue.InvalidArgument):
                root.enqueue_many(jobs)
    assert _stored(server, secrets["root"]) == 0

    # The router, as a plain gRPC client sends it: one call.
    stub = pb_grpc.QueueStub(grpc.insecure_channel(server.address))
    request = pb.EnqueueRequest(
        jobs=[pb.NewJob(type="t", queue=ALLOWED), pb.NewJob(type="t", queue=forbidden)]
    )
    with pytest.raises(grpc.RpcError) as refused:
        stub.Enqueue(request, timeout=30, metadata=(("authorization", f"Bearer {secrets['producer']}"),))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "nothing was enqueued on any shard" in (refused.value.details() or "")

    # Over HTTP.
    body = json.dumps(mixed).encode()
    http = urllib.request.Request(
        f"http://{server.http_address}/v1/jobs",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {secrets['producer']}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(http, timeout=30)
    assert answer.value.code == 403
    assert _stored(server, secrets["root"]) == 0, "no shard took its jobs"

    # And the same calls go in whole when they may.
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        assert len(root.enqueue_many(mixed)) == 2
        assert root.count_jobs(queue=ALLOWED) == 1 and root.count_jobs(queue=forbidden) == 1


def test_a_shard_that_does_not_answer_refuses_the_whole_call(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address, timeout=3) as client:
            topology = client.topology()
            assert topology is not None
            by_shard = {topology.shard_of_queue(f"q{i}"): f"q{i}" for i in range(50)}
            assert server.proc is not None
            children = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
            stuck = next(
                int(p) for p in children.stdout.split() if "shard-1" in Path(f"/proc/{p}/cmdline").read_text()
            )
            os.kill(stuck, signal.SIGSTOP)
            try:
                with pytest.raises(pyqueue.PyQueueError):
                    client.enqueue_many(
                        [{"type": "t", "queue": by_shard[0]}, {"type": "t", "queue": by_shard[1]}]
                    )
            finally:
                os.kill(stuck, signal.SIGCONT)
        with pyqueue.Client(server.address) as client:
            assert client.count_jobs(queue=by_shard[0]) == 0, "the shard that answered took nothing"
    finally:
        server.close()
