"""A batch belongs to the queues of its jobs and callbacks: another team's tokens neither list it,
read it nor add to it (and adding writes nothing); its own team's do. Two shards, tokens on."""

from pathlib import Path

import pytest
from auth_files import write_auth_file
from harness import ServerProcess, queue_on

import pyqueue
from pyqueue.cluster import Topology

GRANTS = {
    "root": ["admin:*"],
    "a-read": ["read:team-a-*"],
    "a-produce": ["produce:team-a-*"],
    "b-read": ["read:team-b-*"],
    "b-produce": ["produce:team-b-*"],
    "b-work": ["work:team-b-*"],
}


def auth_file(path: Path) -> dict[str, str]:
    return write_auth_file(path, GRANTS)


def test_another_team_neither_sees_nor_joins_a_batch(tmp_path: Path) -> None:
    tokens = auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data", "--shards", "2", "--auth-file", str(tmp_path / "auth.toml")
    ).start()
    topology = Topology(("", ""))
    # Team A's member on one shard, its callback on the other: the batch spans both.
    member, callback = "team-a-x", "team-a-y"
    while topology.shard_of_queue(member) == topology.shard_of_queue(callback):
        callback += "y"
    b_queue = "team-b-" + queue_on(topology, 0)
    try:
        with pyqueue.Client(server.address, token=tokens["root"]) as root:
            run = root.enqueue_workflow(
                pyqueue.Batch(
                    [pyqueue.Task({"type": "m", "queue": member})],
                    on_success=pyqueue.Task({"type": "cb", "queue": callback}),
                )
            )
            batch_id = run.batch_id
        with pyqueue.Client(server.address, token=tokens["b-read"]) as b_reader:
            assert [b.id for b in b_reader.batches()] == []
            with pytest.raises(pyqueue.PermissionDenied, match="read"):
                b_reader.batch(batch_id)
        with (
            pyqueue.Client(server.address, token=tokens["b-produce"]) as b_producer,
            pytest.raises(pyqueue.PermissionDenied, match="team-a"),
        ):
            b_producer.add_to_batch(batch_id, [pyqueue.Task({"type": "injected", "queue": b_queue})])
        with pyqueue.Client(server.address, token=tokens["a-read"]) as a_reader:
            assert [b.id for b in a_reader.batches()] == [batch_id]
            assert a_reader.batch(batch_id).total == 1  # team B's job was not added
        with pyqueue.Client(server.address, token=tokens["a-produce"]) as a_producer:
            assert a_producer.add_to_batch(batch_id, [pyqueue.Task({"type": "m", "queue": member})]) == [1]
            with pytest.raises(pyqueue.PermissionDenied, match="admin"):
                a_producer.cancel_workflow(run.workflow_id)
    finally:
        server.close()
