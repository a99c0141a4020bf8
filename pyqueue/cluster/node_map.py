"""A cluster node's supervisor's view of the cluster: its own name, held in the bucket while it
runs (a second node with the same name is refused), and where each shard's owner serves, which
the node's public address forwards to and tells clients (GetTopology).
"""

import asyncio
import functools
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pyqueue.cluster.handover import ask_handover, is_drained
from pyqueue.cluster.lease import Owner, read_owner
from pyqueue.cluster.nats_link import ClusterConfig, ClusterError, NatsLink

if TYPE_CHECKING:
    from prometheus_client.core import Metric

log = logging.getLogger("pyqueue.cluster")
POLL_S = 0.2  # how often the owners are read: a takeover reaches clients within this
SPREAD_LAG = 10_000  # a node asks for a shard only when its standby is this close to the end


def node_key(node: str) -> str:
    return f"node.{node}"


class NodeMap:
    def __init__(self, config: ClusterConfig, shards: int) -> None:
        self.config = config
        self.shards = shards
        self.link = NatsLink(config)
        self.instance = uuid.uuid4().hex
        self.address = ""
        self.relay_secret = ""  # the cluster's (server/relay_secret.py), read when joining
        self.owners: list[Owner | None] = [None] * shards
        # For /metrics: what this node saw and did.
        self.owner_changes = [0] * shards  # a shard's owner became another node
        self._last_node = [""] * shards
        self._asked: tuple[int, float] | None = None  # a handover this node asked for, and when
        self.live: set[str] = set()  # the nodes whose names are held, as last read
        self.heard_at = time.monotonic()  # the last pass that read every shard's owner
        self.standby_lag: dict[int, int] = {}  # entries this node's standby of a shard has not applied
        self.exits = {"lost": 0, "handed_over": 0}  # this node's owners that lost or handed over a shard
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
        self.relay_secret = await self.link.run(lambda: join(self.link, self.shards))
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
            heard = True
            for shard in range(self.shards):
                try:
                    owner = await self.link.run(lambda s=shard: read_owner(self.link.kv, s))  # type: ignore[misc]
                except Exception as exc:
                    log.debug("reading shard %d's owner: %s", shard, exc)
                    heard = False
                    continue
                before = self.owners[shard]
                self.owners[shard] = owner
                if owner is not None:  # a released lease (None) between two owners is still a change
                    if self._last_node[shard] not in ("", owner.node):
                        self.owner_changes[shard] += 1
                    self._last_node[shard] = owner.node
                if (
                    owner is not None
                    and owner.address
                    and (before is None or before.address != owner.address)
                ):
                    log.info("shard %d is served by %s at %s", shard, owner.node, owner.address)
                    await moved(shard, owner.address)
            if heard:
                self.heard_at = time.monotonic()
            if time.monotonic() - renewed > self.config.lease_s / 3:
                await self._measure_lag()
                try:
                    await self.link.run(self._spread)
                except Exception as exc:  # looked at again next time
                    log.debug("spreading shards: %s: %s", type(exc).__name__, exc)
                try:
                    self._revision = await self.link.run(self._renew)
                    renewed = time.monotonic()
                except Exception as exc:
                    log.warning("renewing this node's name: %s", exc)
            await asyncio.sleep(POLL_S)

    async def _measure_lag(self) -> None:
        """How far this node's standbys are behind their changelogs (as they last reported)."""
        for shard in range(self.shards):
            owner = self.owners[shard]
            if owner is not None and owner.node == self.config.node:
                self.standby_lag.pop(shard, None)
                continue
            try:
                self.standby_lag[shard] = await self.link.run(functools.partial(self._lag_of, shard))
            except Exception as exc:  # not reported yet, or NATS busy: measured next time
                log.debug("measuring shard %d's lag: %s: %s", shard, type(exc).__name__, exc)

    async def _spread(self) -> None:
        """Spread the shards over the nodes: a node that owns two fewer than the busiest live one
        asks it to hand over the shard this node's standby is closest on (one at a time). So a
        node that joins, or comes back, takes its share without an operator's `move`."""
        from nats.js.errors import NoKeysError

        me = self.config.node
        if self._asked is not None:
            shard, since = self._asked
            owner = self.owners[shard]
            if (
                not (owner is not None and owner.node == me)
                and time.monotonic() - since < 3 * self.config.lease_s
            ):
                return  # the last request is still under way
            self._asked = None
        if await is_drained(self.link.kv, me):
            return
        try:
            live = {key[5:] for key in await self.link.kv.keys() if key.startswith("node.")}
        except NoKeysError:
            return
        self.live = live
        owned: dict[str, list[int]] = {node: [] for node in live}
        for shard, owner in enumerate(self.owners):
            if owner is not None and owner.node in owned:
                owned[owner.node].append(shard)
        busiest = max(owned, key=lambda n: len(owned[n]))
        if len(owned[busiest]) - len(owned.get(me, [])) < 2:
            return
        closest = min(owned[busiest], key=lambda s: self.standby_lag.get(s, 1 << 62))
        if self.standby_lag.get(closest, 1 << 62) > SPREAD_LAG:
            return  # not caught up yet: the handover would wait on it
        log.info("asking %s to hand shard %d over (it owns %d, this node %d)",
                 busiest, closest, len(owned[busiest]), len(owned.get(me, [])))  # fmt: skip
        await ask_handover(self.link.kv, closest, busiest, me)
        self._asked = (closest, time.monotonic())

    async def _lag_of(self, shard: int) -> int:
        info = await self.link.js.stream_info(self.config.stream(shard))
        entry = await self.link.kv.get(f"replica.{shard}.{self.config.node}")
        applied = int(json.loads(entry.value or b"{}").get("applied", 0))
        return max(0, int(info.state.last_seq) - applied)

    def view(self) -> dict[str, Any]:
        """What the dashboard's cluster page shows, from what this node last read (no NATS call)."""
        owners = [o.node if o else "" for o in self.owners]
        shards = [
            {"shard": i, "owner": owners[i], "address": o.address if o else ""}
            for i, o in enumerate(self.owners)
        ]
        nodes = sorted(self.live | {n for n in owners if n} | {self.config.node})
        return {
            "cluster": self.config.name,
            "this_node": self.config.node,
            "nodes": [{"name": n, "owns": [i for i, o in enumerate(owners) if o == n]} for n in nodes],
            "shards": shards,
            "standby_lag": {str(k): v for k, v in sorted(self.standby_lag.items())},
        }

    def families(self) -> "list[Metric]":
        """This node's part of /metrics."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        changes = CounterMetricFamily(
            "pyqueue_cluster_owner_changes",
            "Times a shard's owner became another node, as this node saw it.",
            labels=["shard"],
        )
        for shard, n in enumerate(self.owner_changes):
            changes.add_metric([str(shard)], n)
        lag = GaugeMetricFamily(
            "pyqueue_cluster_standby_lag_entries",
            "Changelog entries this node's standby of a shard has not applied yet.",
            labels=["shard"],
        )
        for shard, n in sorted(self.standby_lag.items()):
            lag.add_metric([str(shard)], n)
        exits = CounterMetricFamily(
            "pyqueue_cluster_owner_exits",
            "This node's owners that stopped: lost (fenced, or the lease not renewed in time) or handed over (a move, a drain).",
            labels=["why"],
        )
        for why, n in sorted(self.exits.items()):
            exits.add_metric([why], n)
        return [changes, lag, exits]

    async def _renew(self) -> int:
        return int(await self.link.kv.update(node_key(self.config.node), self._value(), last=self._revision))

    def cut_off(self) -> bool:
        """This node has not read the owners for a lease: what it knows of them may be stale."""
        return time.monotonic() - self.heard_at > self.config.lease_s

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
