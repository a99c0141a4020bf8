"""The slot map: a queue's slot is a stable hash of its name; slots belong to shards by modulo."""

import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from pyqueue.v1 import queue_pb2 as pb

SLOTS = 1024
SHARD_MASK = 0xFF  # a job id's low 8 bits (see pyqueue.engine.ids)


def slot_of(queue: str) -> int:
    return zlib.crc32((queue or "default").encode()) % SLOTS


def shard_of_job(job_id: int) -> int:
    return job_id & SHARD_MASK


@dataclass(frozen=True)
class Topology:
    addresses: tuple[str, ...]  # shard index -> address
    slots: int = SLOTS

    @property
    def shards(self) -> int:
        return len(self.addresses)

    def shard_of_queue(self, queue: str) -> int:
        return (zlib.crc32((queue or "default").encode()) % self.slots) % self.shards

    def by_shard(self, queues: Iterable[str]) -> dict[int, list[str]]:
        owners: dict[int, list[str]] = {}
        for queue in queues:
            owners.setdefault(self.shard_of_queue(queue), []).append(queue)
        return owners

    def to_pb(self) -> pb.Topology:
        return pb.Topology(
            slots=self.slots, shards=[pb.Shard(index=i, address=a) for i, a in enumerate(self.addresses)]
        )

    @classmethod
    def from_pb(cls, message: pb.Topology) -> "Topology":
        ordered = sorted(message.shards, key=lambda s: s.index)
        return cls(tuple(s.address for s in ordered), message.slots or SLOTS)
