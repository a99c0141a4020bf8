"""A cluster node's supervisor's view of the cluster: its own name, held in the bucket while it
runs (a second node with the same name is refused), and where each shard's owner serves, which
the node's public address forwards to and tells clients (GetTopology).
"""

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from pyqueue.cluster.lease import Owner, read_owner
from pyqueue.cluster.nats_link import ClusterConfig, ClusterError, NatsLink

log = logging.getLogger("pyqueue.cluster")
POLL_S = 0.2  # how often the owners are read: a takeover reaches clients within this


def node_key(node: str) -> str:
    return f"node.{node}"


class NodeMap:
    def __init__(self, config: ClusterConfig, shards: int) -> None:
        self.config = config
        self.shards = shards
        self.link = NatsLink(config)
        self.instance = uuid.uuid4().hex
        self.address = ""
        self.owners: list[Owner | None] = [None] * shards
        self._revision = 0
        self._stopped = False

    def _value(self) -> bytes:
        return json.dumps({"instance": self.instance, "address": self.address}).encode()

    async def join(self) -> None:
        """Connect (a clear error if NATS answers nothing), then hold this node's name: a name
        renewed by someone else within a lease belongs to a running node, and is refused."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        from pyqueue.cluster.shard_node import join

        await asyncio.to_thread(self.link.start)
        await self.link.run(lambda: join(self.link, self.shards))
        key = node_key(self.config.node)
        first_seen: tuple[int, float] | None = None
        while True:
            try:
                self._revision = await self.link.run(lambda: self.link.kv.create(key, self._value()))
                return
            except KeyWrongLastSequenceError:
                pass
            try:
                entry = await self.link.run(lambda: self.link.kv.get(key))
            except KeyNotFoundError:
                continue
            revision = int(entry.revision)
            if first_seen is not None and first_seen[0] != revision:
                held = json.loads(entry.value or b"{}").get("address", "?")
                raise ClusterError(
                    f"another node named {self.config.node!r} is running (at {held}); give each "
                    "node its own --node"
                )
            if first_seen is None:
                first_seen = (revision, time.monotonic())
                log.info(
                    "the name %r was held; waiting a lease to see whether its node still runs",
                    self.config.node,
                )
            elif time.monotonic() - first_seen[1] >= self.config.lease_s:
                try:
                    self._revision = await self.link.run(
                        lambda r=revision: self.link.kv.update(key, self._value(), last=r)  # type: ignore[misc]
                    )
                    return
                except KeyWrongLastSequenceError:
                    first_seen = None
            await asyncio.sleep(self.config.lease_s / 6)

    async def follow(self, moved: Callable[[int, str], Awaitable[None]]) -> None:
        """Until stopped: renew this node's name, and call `moved(shard, address)` when a shard's
        owner serves somewhere new."""
        renewed = time.monotonic()
        while not self._stopped:
            for shard in range(self.shards):
                try:
                    owner = await self.link.run(lambda s=shard: read_owner(self.link.kv, s))  # type: ignore[misc]
                except Exception as exc:
                    log.debug("reading shard %d's owner: %s", shard, exc)
                    continue
                before = self.owners[shard]
                self.owners[shard] = owner
                if (
                    owner is not None
                    and owner.address
                    and (before is None or before.address != owner.address)
                ):
                    log.info("shard %d is served by %s at %s", shard, owner.node, owner.address)
                    await moved(shard, owner.address)
            if time.monotonic() - renewed > self.config.lease_s / 3:
                try:
                    self._revision = await self.link.run(self._renew)
                    renewed = time.monotonic()
                except Exception as exc:
                    log.warning("renewing this node's name: %s", exc)
            await asyncio.sleep(POLL_S)

    async def _renew(self) -> int:
        return int(await self.link.kv.update(node_key(self.config.node), self._value(), last=self._revision))

    async def all_owned(self, timeout: float) -> bool:
        """Wait until every shard has an owner serving (at most `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(o is not None and o.address for o in self.owners):
                return True
            await asyncio.sleep(POLL_S)
        return False

    async def leave(self) -> None:
        self._stopped = True
        try:
            await self.link.run(lambda: self.link.kv.delete(node_key(self.config.node), last=self._revision))
        except Exception as exc:
            log.info("this node's name was not released: %s", exc)
        await asyncio.to_thread(self.link.close)
