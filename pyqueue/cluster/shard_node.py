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
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats.errors

from pyqueue.cluster.fail_stop import HANDED_OVER, lost
from pyqueue.cluster.lease import Lease
from pyqueue.cluster.nats_link import ClusterConfig, ClusterError, NatsLink
from pyqueue.cluster.replica import Replica
from pyqueue.cluster.replicated_store import Appender, ReplicatedStore
from pyqueue.store.rocks import RocksStore

log = logging.getLogger("pyqueue.cluster")
# What JetStream answers while it elects a leader or a server is gone: wait and look again.
TRANSIENT = (TimeoutError, OSError, nats.errors.Error)
T = TypeVar("T")
Serve = Callable[..., Awaitable[None]]


async def join(link: NatsLink, shards: int) -> None:
    """Open the cluster's bucket; refuse a shard count other than the cluster's."""
    from nats.js.errors import KeyWrongLastSequenceError

    await link.open_bucket()
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
    shard, shards = config.shard_index, config.shard_count
    link = NatsLink(cluster)
    try:
        link.start()
    except ClusterError as exc:
        raise SystemExit(f"pyqueue serve: {exc}") from None

    try:
        await link.run(lambda: join(link, shards))
        await link.run(lambda: link.open_stream(shard))
    except ClusterError as exc:
        raise SystemExit(f"pyqueue serve: {exc}") from None
    store = RocksStore(config.data_dir, create=True)
    replica = Replica(store, link, shard)
    lease = Lease(link, shard, shards)
    log.info("standing by for shard %d (changelog applied to %d)", shard, replica.applied)

    started, behind, told = time.perf_counter(), True, 0.0

    async def stand_by_once() -> bool:
        nonlocal behind, told
        try:
            if time.monotonic() - told > 1.0:  # for `pyqueue cluster status`: how far behind
                told = time.monotonic()
                await link.kv.put(
                    f"replica.{shard}.{cluster.node}",
                    json.dumps({"applied": replica.applied, "at": time.time()}).encode(),
                )
            if not await replica.fetch(cluster.lease_s / 4) and behind:
                behind = False
                log.info(
                    "shard %d: caught up with the changelog at entry %d (%d entries in %.2fs)",
                    shard, replica.read, replica.entries_applied, replica.applied_at - started,
                )  # fmt: skip
            return await lease.try_take()
        except TRANSIENT as exc:  # JetStream electing a leader, a server gone: look again
            log.info("shard %d: waiting for JetStream (%s: %s)", shard, type(exc).__name__, exc)
            await asyncio.sleep(cluster.lease_s / 4)
            return False

    while not stop.is_set():
        if await link.run(stand_by_once):
            break
    if stop.is_set():
        await link.run(replica.close)
        store.close()
        link.close()
        return
    main = asyncio.get_running_loop()

    handed_over = False

    def hand_over() -> None:  # from the NATS thread: stop as at a SIGTERM, then stand by again
        nonlocal handed_over
        handed_over = True
        main.call_soon_threadsafe(stop.set)

    lease.keep(lost, hand_over)
    appender = Appender(link, shard, 0)
    while True:  # the old owner may still append: read to the end again until the fence holds
        try:
            end = await link.run(replica.catch_up)
        except TRANSIENT as exc:  # the lease keeper stops us if this outlasts the lease
            log.info("shard %d: waiting for JetStream to read the changelog (%s)", shard, type(exc).__name__)
            continue
        if await asyncio.to_thread(appender.fence, end):
            break
    await link.run(replica.close)
    log.info("shard %d: owner from changelog entry %d on (%d entries applied as a standby)",
             shard, appender.last, replica.entries_applied)  # fmt: skip
    max_entry = int(link.nc.max_payload) - 4096
    replicated = ReplicatedStore(store, appender, max_entry)
    await serve(
        replicated,
        on_listening=lambda address: link.run(lambda: lease.announce(address)),
        on_stopped=lambda: link.run(lease.release),
    )
    link.close()
    if handed_over:
        raise SystemExit(HANDED_OVER)  # its supervisor starts it again, as a standby
