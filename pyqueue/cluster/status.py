"""What `pyqueue cluster status` shows, read from the cluster's bucket and streams: the nodes, and
for each shard its owner, its changelog's end and size, and how far each standby has applied it."""

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pyqueue.cluster.lease import read_owner
from pyqueue.cluster.nats_link import ClusterConfig, NatsLink


@dataclass
class Standby:
    node: str
    applied: int
    lag: int  # changelog entries not yet applied
    reported_s_ago: float


@dataclass
class ShardStatus:
    shard: int
    owner: str
    address: str
    lease_renewed_s_ago: float | None
    changelog_first: int  # entries before it were trimmed (a snapshot holds them)
    changelog_end: int
    changelog_bytes: int
    standbys: list[Standby] = field(default_factory=list)


@dataclass
class ClusterStatus:
    name: str
    shards: int
    nodes: dict[str, str]  # name -> public address
    shard_status: list[ShardStatus]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def read_status(link: NatsLink) -> ClusterStatus:
    from nats.js.errors import KeyNotFoundError, NoKeysError

    await link.open_bucket()
    kv = link.kv
    now = time.time()
    try:
        shards = int(json.loads((await kv.get("shards")).value))
    except KeyNotFoundError:
        shards = 0
    try:
        keys = await kv.keys()
    except NoKeysError:
        keys = []
    nodes: dict[str, str] = {}
    replicas: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    for key in keys:
        if key.startswith(("node.", "replica.")):
            try:
                value = json.loads((await kv.get(key)).value or b"{}")
            except KeyNotFoundError:
                continue
            if key.startswith("node."):
                nodes[key[5:]] = value.get("address", "")
            else:
                _, shard, node = key.split(".", 2)
                replicas.setdefault(int(shard), []).append((node, value))
    found = []
    for shard in range(shards):
        owner = await read_owner(kv, shard)
        info = await link.js.stream_info(link.config.stream(shard))
        end = int(info.state.last_seq)
        status = ShardStatus(
            shard, owner.node if owner else "", owner.address if owner else "",
            round(now - owner.at, 1) if owner and owner.at else None, int(info.state.first_seq), end, int(info.state.bytes),
        )  # fmt: skip
        for node, value in sorted(replicas.get(shard, [])):
            if owner is not None and node == owner.node:
                continue
            applied = int(value.get("applied", 0))
            status.standbys.append(
                Standby(node, applied, end - applied, round(now - value.get("at", now), 1))
            )
        found.append(status)
    return ClusterStatus(link.config.name, shards, nodes, found)


def cluster_status(config: ClusterConfig) -> ClusterStatus:
    link = NatsLink(config).start()
    try:
        return link.call(lambda: read_status(link), 30)
    finally:
        link.close()
