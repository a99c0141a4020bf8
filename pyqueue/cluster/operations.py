"""The operator's moves, as `pyqueue cluster move`, `drain` and `undrain` run them: each asks
through the bucket (handover.py), then waits until the cluster has done it, or says what is left."""

import asyncio
import time

from pyqueue.cluster.handover import ask_handover, drained_key
from pyqueue.cluster.lease import read_owner
from pyqueue.cluster.nats_link import ClusterError, NatsLink
from pyqueue.cluster.node_map import node_key


async def _shards(link: NatsLink) -> int:
    from nats.js.errors import KeyNotFoundError

    await link.open_bucket()
    try:
        import json

        return int(json.loads((await link.kv.get("shards")).value))
    except KeyNotFoundError:
        raise ClusterError(f"no cluster named {link.config.name!r} on these NATS servers") from None


async def _check_node(link: NatsLink, node: str) -> None:
    from nats.js.errors import KeyNotFoundError

    try:
        await link.kv.get(node_key(node))
    except KeyNotFoundError:
        raise ClusterError(f"no node named {node!r} runs in the cluster {link.config.name!r}") from None


async def move(link: NatsLink, shard: int, node: str, timeout: float) -> str:
    shards = await _shards(link)
    if not 0 <= shard < shards:
        raise ClusterError(f"the cluster has shards 0 to {shards - 1}; there is no shard {shard}")
    await _check_node(link, node)
    owner = await read_owner(link.kv, shard)
    if owner is not None and owner.node == node:
        return f"shard {shard} is already served by {node}"
    started = time.monotonic()
    await ask_handover(link.kv, shard, owner.node if owner else "", node)
    while time.monotonic() - started < timeout:
        now = await read_owner(link.kv, shard)
        if now is not None and now.node == node and now.address:
            return f"shard {shard} moved to {node} ({now.address}) in {time.monotonic() - started:.1f}s"
        await asyncio.sleep(0.1)
    raise ClusterError(
        f"shard {shard} did not move to {node} within {timeout:g}s (is it caught up? see status)"
    )


async def drain(link: NatsLink, node: str, timeout: float) -> str:
    shards = await _shards(link)
    await _check_node(link, node)
    await link.kv.put(drained_key(node), b"1")
    started = time.monotonic()
    asked: set[int] = set()
    while time.monotonic() - started < timeout:
        owned = [
            s for s in range(shards) if (o := await read_owner(link.kv, s)) is not None and o.node == node
        ]
        if not owned:
            return (
                f"{node} serves no shard ({len(asked)} moved away in {time.monotonic() - started:.1f}s); "
                f"it takes none until `pyqueue cluster undrain {node}`"
            )
        for shard in owned:
            if shard not in asked:
                await ask_handover(link.kv, shard, node, "")
                asked.add(shard)
        await asyncio.sleep(0.1)
    raise ClusterError(f"{node} still serves shards after {timeout:g}s (are other nodes up? see status)")


async def undrain(link: NatsLink, node: str) -> str:
    from nats.js.errors import KeyNotFoundError

    await _shards(link)
    try:
        await link.kv.delete(drained_key(node))
    except KeyNotFoundError:
        return f"{node} was not drained"
    return f"{node} may take shards again"
