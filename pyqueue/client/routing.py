"""Client-side routing for a sharded server: learn the slot map once, then send hot-path calls
(enqueue, get, take, acks) straight to the shard that owns them. Calls that span shards (listing,
counting, bulk changes, queue statistics) go to the public address, which merges them.

A server that is not sharded answers with one shard: then nothing is routed.
"""

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import grpc

from pyqueue.cluster import Topology, shard_of_job
from pyqueue.v1 import queue_pb2 as pb

Stub = TypeVar("Stub")


class Routes(Generic[Stub]):
    """Stubs per shard, made on first use from a topology (a sync or an asyncio flavour)."""

    def __init__(self, public: Stub, make_stub: Callable[[str], Stub]) -> None:
        self.public = public
        self._make_stub = make_stub
        self.topology: Topology | None = None
        self.stubs: list[Stub] = []

    def learn(self, message: pb.Topology | None) -> None:
        topology = Topology.from_pb(message) if message is not None else Topology(("",))
        self.topology = topology
        self.stubs = [self._make_stub(a) for a in topology.addresses] if topology.shards > 1 else []

    def forget(self) -> list[Any]:
        """Drop the slot map (a shard moved or went away): the next call learns it again. Returns the
        stubs dropped, whose channels the caller closes."""
        dropped, self.stubs, self.topology = self.stubs, [], None
        return dropped

    @property
    def sharded(self) -> bool:
        return bool(self.stubs)

    def for_queue(self, queue: str) -> tuple[int, Stub]:
        if not self.stubs:
            return 0, self.public
        assert self.topology is not None
        shard = self.topology.shard_of_queue(queue)
        return shard, self.stubs[shard]

    def for_job(self, job_id: int) -> Stub:
        shard = shard_of_job(job_id)
        return self.stubs[shard] if shard < len(self.stubs) else self.public

    def by_shard(self, queues: Iterable[str]) -> dict[int, list[str]]:
        if not self.stubs or self.topology is None:
            return {0: list(queues)}
        return self.topology.by_shard(queues)

    def stub(self, shard: int) -> Stub:
        return self.stubs[shard] if self.stubs else self.public


def unimplemented(exc: Any) -> bool:
    """An older server without GetTopology: treat it as one shard."""
    return isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.UNIMPLEMENTED
