"""One shard of a cluster node (`pyqueue serve --cluster`): a standby until it owns the shard,
then the owner until it stops or loses the shard.

Standby: keep the local store up with the changelog, and watch the owner's lease. Takeover: take
the lapsed lease, read the changelog to its end, append a fence (after which the old owner can
append nothing), then open the engine on the local store as a restart does (what was in flight
goes back to ready, its attempt counted as lost) and serve, publishing the address in the lease.
An owner that loses its lease or is fenced exits at once; its supervisor starts it again, as a
standby.
"""

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import nats.errors

from pyqueue.cluster.fail_stop import HANDED_OVER, lost
from pyqueue.cluster.lease import Lease
from pyqueue.cluster.nats_link import ClusterConfig, ClusterError, NatsLink
from pyqueue.cluster.replica import Replica
from pyqueue.cluster.replicated_store import Appender, ReplicatedStore
from pyqueue.cluster.snapshots import Snapshotter
from pyqueue.store.rocks import RocksStore

log = logging.getLogger("pyqueue.cluster")
# What JetStream answers while it elects a leader or a server is gone: wait and look again.
TRANSIENT = (TimeoutError, OSError, nats.errors.Error)
T = TypeVar("T")
Serve = Callable[..., Awaitable[None]]
RELAY_SECRET_KEY = "relay-secret"  # the bucket's key of the nodes' relay secret


async def join(link: NatsLink, shards: int) -> str:
    """Open the cluster's bucket; refuse a shard count other than the cluster's. The cluster's
    relay secret (server/relay_secret.py): the first node to join makes it."""
    from nats.js.errors import KeyWrongLastSequenceError

    await link.open_bucket()
    await _check_shards(link, shards)
    with contextlib.suppress(KeyWrongLastSequenceError):  # another node made it
        await link.settled(
            lambda: link.kv.create(RELAY_SECRET_KEY, secrets.token_urlsafe(32).encode()), "joining"
        )
    return bytes((await link.settled(lambda: link.kv.get(RELAY_SECRET_KEY), "joining")).value).decode()


async def _check_shards(link: NatsLink, shards: int) -> None:
    from nats.js.errors import KeyWrongLastSequenceError

    try:
        await link.settled(lambda: link.kv.create("shards", json.dumps(shards).encode()), "joining")
    except KeyWrongLastSequenceError:
        existing = json.loads((await link.settled(lambda: link.kv.get("shards"), "joining")).value)
        if existing != shards:
            raise ClusterError(
                f"the cluster {link.config.name!r} has {existing} shards; start this node with "
                f"--shards {existing} (a cluster's shard count is fixed when it is created)"
            ) from None


async def run_shard(config: Any, cluster: ClusterConfig, stop: asyncio.Event, serve: Serve) -> None:
    node = ShardNode(config.data_dir, config.shard_index, config.shard_count, cluster, stop)
    try:
        await node.join()
    except ClusterError as exc:
        raise SystemExit(f"pyqueue serve: {exc}") from None
    if not await node.stand_by():
        node.close()
        return
    await node.take_over()
    await node.own(serve)
    if node.handed_over:
        raise SystemExit(HANDED_OVER)  # its supervisor starts it again, as a standby


class ShardNode:
    """The phases of one shard process of a cluster node, in order: join, stand by, take over, own."""

    def __init__(
        self, data_dir: Path, shard: int, shards: int, cluster: ClusterConfig, stop: asyncio.Event
    ) -> None:
        self.data_dir, self.shard, self.shards, self.cluster, self.stop = (
            data_dir,
            shard,
            shards,
            cluster,
            stop,
        )
        self.link = NatsLink(cluster)
        self.lease = Lease(self.link, shard, shards)
        self.replica: Replica | None = None
        self.appender = Appender(self.link, shard, 0)
        self.handed_over = False
        self._caught_up = False
        self._told = 0.0

    async def join(self) -> None:
        await asyncio.to_thread(self.link.start)  # a connect can take connect_timeout_s: off the loop
        await self.link.run(lambda: join(self.link, self.shards))
        await self.link.run(lambda: self.link.open_stream(self.shard))
        self.replica = Replica(RocksStore(self.data_dir, create=True), self.link, self.shard)
        log.info("standing by for shard %d (changelog applied to %d)", self.shard, self.replica.applied)

    async def stand_by(self) -> bool:
        """Apply the changelog until this node takes the lease (True) or is stopped (False)."""
        started = time.perf_counter()
        while not self.stop.is_set():
            if await self.link.run(lambda: self._stand_by_once(started)):
                return True
        return False

    async def _stand_by_once(self, started: float) -> bool:
        assert self.replica is not None
        replica, shard = self.replica, self.shard
        try:
            if time.monotonic() - self._told > 1.0:  # for `pyqueue cluster status`: how far behind
                self._told = time.monotonic()
                await self.link.kv.put(
                    f"replica.{shard}.{self.cluster.node}",
                    json.dumps({"applied": replica.applied, "at": time.time()}).encode(),
                )
            if not await replica.fetch(self.cluster.lease_s / 4) and not self._caught_up:
                self._caught_up = True
                log.info(
                    "shard %d: caught up with the changelog at entry %d (%d entries in %.2fs)",
                    shard, replica.read, replica.entries_applied, replica.applied_at - started,
                )  # fmt: skip
            return await self.lease.try_take()
        except TRANSIENT as exc:  # JetStream electing a leader, a server gone: look again
            log.info("shard %d: waiting for JetStream (%s: %s)", shard, type(exc).__name__, exc)
            await asyncio.sleep(self.cluster.lease_s / 4)
            return False

    async def take_over(self) -> None:
        """Hold the lease, read the changelog to its end and fence it: from now on only this
        process can append."""
        assert self.replica is not None
        main = asyncio.get_running_loop()

        def hand_over() -> None:  # from the NATS thread: stop as at a SIGTERM, then stand by again
            self.handed_over = True
            main.call_soon_threadsafe(self.stop.set)

        self.lease.keep(lost, hand_over)
        while True:  # the old owner may still append: read to the end again until the fence holds
            try:
                end = await self.link.run(self.replica.catch_up)
            except TRANSIENT as exc:  # the lease keeper stops us if this outlasts the lease
                log.info(
                    "shard %d: waiting for JetStream to read the changelog (%s)",
                    self.shard,
                    type(exc).__name__,
                )
                continue
            if await asyncio.to_thread(self.appender.fence, end):
                break
        await self.link.run(self.replica.close)
        log.info("shard %d: owner from changelog entry %d on (%d entries applied as a standby)",
                 self.shard, self.appender.last, self.replica.entries_applied)  # fmt: skip

    async def own(self, serve: Serve) -> None:
        """Serve the local store (a restored snapshot's, maybe) through the changelog, snapshotting
        it as the changelog grows, until stopped."""
        assert self.replica is not None
        store = self.replica.store
        replicated = ReplicatedStore(store, self.appender, int(self.link.nc.max_payload) - 4096)
        snapshotter = Snapshotter(self.link, self.shard, store, self.cluster.snapshot_bytes)
        snapshots = asyncio.run_coroutine_threadsafe(snapshotter.run(), self.link.loop)

        async def stopped() -> None:  # everything is written; the store closes after this
            await self.link.run(snapshotter.stop)
            snapshots.cancel()
            await self.link.run(self.lease.release)

        await serve(
            replicated,
            on_listening=lambda address: self.link.run(lambda: self.lease.announce(address)),
            on_stopped=stopped,
        )
        self.link.close()

    def close(self) -> None:
        """Stopped while standing by."""
        if self.replica is not None:
            self.link.call(self.replica.close, 10)
            self.replica.store.close()
        self.link.close()
