"""The relay's calls (PullOutbox, ApplyInbox) answer only the server's own relay: on a shard's own
port, a caller without the server's secret is refused PERMISSION_DENIED whatever token it holds,
before anything is read or written; and an entry sent with the secret is still checked as the
public API checks a request (INVALID_ARGUMENT, nothing written)."""

import base64
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from auth_files import write_auth_file
from harness import ServerProcess, children, queue_on

import pyqueue
from pyqueue.cluster import Topology
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

TOPOLOGY = Topology(("", ""))
SECRET_ENV = "PYQUEUE_RELAY_SECRET"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        yield s
    finally:
        s.close()


def shard_address(server: ServerProcess, shard: int) -> str:
    with pyqueue.Client(server.address) as client:
        topology = client.topology()
        assert topology is not None
        return topology.addresses[shard]


def shard_secret(server: ServerProcess) -> str:
    """The secret as the supervisor handed it to a shard (root reads any process's environment)."""
    assert server.proc is not None
    for pid in children(server.proc.pid):
        for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if item.startswith(SECRET_ENV.encode() + b"="):
                return item.split(b"=", 1)[1].decode()
    raise AssertionError("no shard holds a relay secret")


def job_entry(queue: str = "", **fields: Any) -> bytes:
    job = {
        "type": "forged",
        "queue": queue,
        "priority": 32768,
        "payload": base64.b64encode(b'{"args":[]}').decode(),
        "content_type": "application/json",
        "run_at_ms": 0,
        "max_retries": -1,
        "timeout_ms": 0,
        "options": "",
        "unique_key": "",
        "unique_scope": 0,
        "limit_key": "",
        "fold_key": "",
        "fold_max": 0,
    }
    job.update(fields)
    return json.dumps({"to": 0, "p": 0, "k": "job", "job": job, "flow": {"w": 77}, "d": 0}).encode()


def apply(
    address: str, seq: int, entry: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        try:
            pb_grpc.QueueStub(channel).ApplyInbox(
                pb.ApplyInboxRequest(source=1, entries=[pb.OutboxEntry(seq=seq, to=0, entry=entry)]),
                metadata=metadata,
                timeout=30,
            )
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_outsiders_are_refused_and_the_relay_still_carries(server: ServerProcess) -> None:
    zero, one = queue_on(TOPOLOGY, 0), queue_on(TOPOLOGY, 1)
    address = shard_address(server, 0)
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.QueueStub(channel)
        with pytest.raises(grpc.RpcError) as pulled:
            stub.PullOutbox(pb.PullOutboxRequest(after=2**63), timeout=30)
        assert pulled.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "relay" in (pulled.value.details() or "")
    # A sequence of 2^63 from shard 1 would make shard 0 skip every later entry of shard 1.
    assert apply(address, 2**63, job_entry(zero)) == grpc.StatusCode.PERMISSION_DENIED
    assert (
        apply(address, 1, job_entry(zero), (("x-pyqueue-relay", "guess"),))
        == grpc.StatusCode.PERMISSION_DENIED
    )
    with pyqueue.Client(server.address) as client:
        assert client.count_jobs(queue=zero) == 0
        # A chain across the shards, and back: each step carried by the relay, nothing trimmed.
        client.enqueue_workflow(
            pyqueue.Chain(
                pyqueue.Task({"type": "a", "queue": one}), pyqueue.Task({"type": "b", "queue": zero})
            )
        )
        with client.take([zero, one], prefetch=4) as stream:
            for expected in ("a", "b"):
                job = stream.next(timeout=60)
                assert job is not None and job.type == expected
                job.ack()


def test_the_secret_is_on_no_command_line_and_in_no_log(server: ServerProcess) -> None:
    secret = shard_secret(server)
    assert server.proc is not None
    for pid in [server.proc.pid, *children(server.proc.pid)]:
        assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert secret not in "".join(server.lines)


@pytest.mark.parametrize(
    "fields, says",
    [
        (
            {"options": base64.b64encode(json.dumps({"keep_completed_ms": 2**63 - 1}).encode()).decode()},
            "keep_completed_ms",
        ),
        (
            {"options": base64.b64encode(json.dumps({"backoff": [math.nan, 4, 10]}).encode()).decode()},
            "finite",
        ),
        ({"payload": base64.b64encode(b"not json").decode()}, "JSON"),
        ({"queue": "bad\0queue"}, "queue"),
        ({"queue": queue_on(TOPOLOGY, 1)}, "belongs to shard 1"),
        ({"options": base64.b64encode(b'{"cancelled": true}').decode()}, "only the server sets"),
        ({"priority": "high"}, "not an outbox entry"),
    ],
)
def test_entries_sent_with_the_secret_are_checked_as_requests_are(
    server: ServerProcess, fields: dict[str, Any], says: str
) -> None:
    zero = queue_on(TOPOLOGY, 0)
    address = shard_address(server, 0)
    metadata = (("x-pyqueue-relay", shard_secret(server)),)
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.QueueStub(channel)
        entry = pb.OutboxEntry(seq=1, to=0, entry=job_entry(**{"queue": zero, **fields}))
        with pytest.raises(grpc.RpcError) as refused:
            stub.ApplyInbox(pb.ApplyInboxRequest(source=1, entries=[entry]), metadata=metadata, timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert says in (refused.value.details() or "")
        # The same sequence, well formed: applied (so the refusal left the inbox where it stood).
        good = pb.OutboxEntry(seq=1, to=0, entry=job_entry(zero))
        assert (
            stub.ApplyInbox(
                pb.ApplyInboxRequest(source=1, entries=[good]), metadata=metadata, timeout=30
            ).applied
            == 1
        )
    with pyqueue.Client(server.address) as client:
        assert [j.type for j in client.list_jobs(queue=zero)] == ["forged"]


def test_with_tokens_no_token_makes_a_relay_call(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    tokens = write_auth_file(auth)
    server = ServerProcess(tmp_path / "data", "--shards", "2", "--auth-file", str(auth)).start()
    try:
        with pyqueue.Client(server.address, token=tokens["root"]) as client:
            topology = client.topology()
            assert topology is not None
        for name in ("root", "admin", "worker"):
            with grpc.insecure_channel(topology.addresses[0]) as channel:
                with pytest.raises(grpc.RpcError) as refused:
                    pb_grpc.QueueStub(channel).PullOutbox(
                        pb.PullOutboxRequest(after=2**63),
                        metadata=(("authorization", f"Bearer {tokens[name]}"),),
                        timeout=30,
                    )
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, name
    finally:
        server.close()
