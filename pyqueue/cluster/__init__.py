"""Sharding: which shard owns a queue or a job, kept behind one small interface (`Topology`).

Ownership is a pure function of the names here; a later move to slot ownership across machines
(an external coordinator) changes only how a Topology is obtained.
"""

from pyqueue.cluster.topology import SLOTS, Topology, shard_of_job, slot_of

__all__ = ["SLOTS", "Topology", "shard_of_job", "slot_of"]
