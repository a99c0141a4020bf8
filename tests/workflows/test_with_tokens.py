"""With tokens on, the relay between shards carries a batch's events (with the server's secret,
no token), a token's rights hold for workflow calls, and the relay's calls refuse every token."""

from pathlib import Path

import grpc
import pytest
from auth_files import write_auth_file
from harness import ServerProcess

import pyqueue
from pyqueue.cluster import Topology
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

TOPOLOGY = Topology(("", ""))


def test_a_batch_across_shards_finishes_with_tokens_on(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    secrets = write_auth_file(auth)
    server = ServerProcess(tmp_path / "data", "--shards", "2", "--auth-file", str(auth)).start()
    queues = [
        next(q for q in (f"q{i}" for i in range(100)) if TOPOLOGY.shard_of_queue(q) == s) for s in (0, 1)
    ]
    try:
        with pyqueue.Client(server.address, token=secrets["root"]) as root:
            members = [pyqueue.Task({"type": "m", "queue": q}) for q in queues]
            run = root.enqueue_workflow(
                pyqueue.Batch(members, on_complete=pyqueue.Task({"type": "cb", "queue": queues[0]}))
            )
            with root.take(queues, prefetch=10) as stream:
                for _ in range(2):
                    job = stream.next(timeout=30)
                    assert job is not None and job.type == "m"
                    job.ack()
                callback = stream.next(timeout=60)  # made only once the other shard's event came
                assert callback is not None and callback.type == "cb" and callback.input["completed"] == 2

        with pyqueue.Client(server.address, token=secrets["producer"]) as producer:
            with pytest.raises(pyqueue.PermissionDenied, match="produce"):
                producer.enqueue_workflow(pyqueue.Task({"type": "m", "queue": queues[0]}))
            with pytest.raises(pyqueue.PermissionDenied, match="admin"):
                producer.cancel_workflow(run.workflow_id)

        # The relay's own calls, straight to a shard with a known token: refused.
        with grpc.insecure_channel(root_address(server, root_token=secrets["root"])) as channel:
            stub = pb_grpc.QueueStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.PullOutbox(
                    pb.PullOutboxRequest(), metadata=(("authorization", f"Bearer {secrets['admin']}"),)
                )
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        server.close()


def root_address(server: ServerProcess, root_token: str) -> str:
    with pyqueue.Client(server.address, token=root_token) as client:
        topology = client.topology()
        assert topology is not None
        return topology.addresses[0]
