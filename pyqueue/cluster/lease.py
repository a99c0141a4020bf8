"""A shard's owner lease, a key in the cluster's JetStream bucket (`owner.N`), taken and renewed
by compare-and-set on its revision.

No clocks are compared between hosts. A standby watches the key's revision; when it has not
changed for a whole lease (by the standby's own clock), the owner is gone and the standby takes
the key by updating that revision (only one can). An owner renews every third of a lease and
stops at once when it cannot within half a lease, or finds the key taken: so it has stopped
before any standby could see its lease lapse. Writes are fenced besides by the changelog itself
(replicated_store.py); this bounds deliveries.
"""

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyqueue.cluster.handover import done as handover_done
from pyqueue.cluster.handover import may_take_free, read_handover
from pyqueue.cluster.nats_link import NatsLink

log = logging.getLogger("pyqueue.cluster")


@dataclass(frozen=True)
class Owner:
    node: str
    address: str  # '' while the new owner catches up
    revision: int
    at: float = 0.0  # the owner's wall time at its last renewal (for people; the lease ignores it)


def owner_key(shard: int) -> str:
    return f"owner.{shard}"


async def read_owner(kv: Any, shard: int) -> Owner | None:
    from nats.js.errors import KeyNotFoundError

    try:
        entry = await kv.get(owner_key(shard))
    except KeyNotFoundError:  # KeyDeletedError is one too: a released lease
        return None
    value = json.loads(entry.value or b"{}")
    return Owner(
        str(value.get("node", "")),
        str(value.get("address", "")),
        int(entry.revision or 0),
        float(value.get("at", 0)),
    )


class Lease:
    def __init__(
        self, link: NatsLink, shard: int, shards: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.link = link
        self.shard = shard
        self.shards = shards
        self.key = owner_key(shard)
        self.lease_s = link.config.lease_s
        self.clock = clock
        self.revision = 0
        self.address = ""
        self.renewed_at = 0.0
        self._seen: tuple[int, float] | None = None  # (revision, when this node first saw it)
        self._keeper: Any = None
        self._updating: asyncio.Lock | None = None  # renewals and the announcement, one at a time

    async def _update(self) -> None:
        if self._updating is None:
            self._updating = asyncio.Lock()
        async with self._updating:
            sent = self.clock()
            self.revision = await asyncio.wait_for(
                self.link.kv.update(self.key, self._value(), last=self.revision), self.lease_s / 4
            )
            self.renewed_at = sent

    def _value(self) -> bytes:
        # The wall time is for people reading `pyqueue cluster status`; the lease itself compares
        # no clocks.
        return json.dumps(
            {"node": self.link.config.node, "address": self.address, "at": time.time()}
        ).encode()

    async def try_take(self) -> bool:
        """One look at the key: take it if it is free or has lapsed. True when this node owns it."""
        from nats.js.errors import KeyWrongLastSequenceError

        owner = await read_owner(self.link.kv, self.shard)
        now = self.clock()
        try:
            if owner is None:
                if not await may_take_free(self.link.kv, self.shard, self.link.config.node, self.lease_s):
                    return False
                if await self._waits_its_turn():
                    return False
                started = self.clock()
                self.revision = await self.link.kv.create(self.key, self._value())
            else:
                if self._seen is None or self._seen[0] != owner.revision:
                    self._seen = (owner.revision, now)
                    return False
                if now - self._seen[1] < self.lease_s:
                    return False
                started = self.clock()
                self.revision = await self.link.kv.update(self.key, self._value(), last=owner.revision)
        except KeyWrongLastSequenceError:
            return False
        self.renewed_at = started
        log.info(
            "shard %d: took the lease (%s)",
            self.shard,
            "it was free" if owner is None else f"{owner.node} went silent",
        )
        return True

    async def _waits_its_turn(self) -> bool:
        """Spread the shards: a node that owns some already lets the others take a free one first
        (half a lease for each it owns)."""
        owned = 0
        for shard in range(self.shards):
            other = await read_owner(self.link.kv, shard) if shard != self.shard else None
            owned += other is not None and other.node == self.link.config.node
        if owned == 0:
            return False
        if self._seen is None or self._seen[0] != -1:
            self._seen = (-1, self.clock())
        return self.clock() - self._seen[1] < owned * self.lease_s / 2

    def keep(self, on_lost: Callable[[str], None], on_handover: Callable[[], None]) -> None:
        """Renew every third of a lease until released; `on_lost(why)` when it is lost, and
        `on_handover()` (once) when the owner is asked to step down."""
        self._keeper = asyncio.run_coroutine_threadsafe(self._keep(on_lost, on_handover), self.link.loop)

    async def _keep(self, on_lost: Callable[[str], None], on_handover: Callable[[], None]) -> None:
        from nats.js.errors import KeyWrongLastSequenceError

        asked = False
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if await self.renew_once(on_lost, KeyWrongLastSequenceError):
                return
            if not asked:
                try:
                    handover = await read_handover(self.link.kv, self.shard)
                except Exception as exc:  # read again at the next renewal
                    log.debug("reading shard %d's handover: %s", self.shard, exc)
                    continue
                if handover is not None and handover.source == self.link.config.node:
                    asked = True
                    log.info(
                        "shard %d: asked to hand over to %s; stopping",
                        self.shard,
                        handover.target or "another node",
                    )
                    on_handover()

    async def renew_once(self, on_lost: Callable[[str], None], wrong: type[Exception]) -> bool:
        """One renewal; True if the lease is lost (and `on_lost` was called)."""
        try:
            await self._update()
            return False
        except wrong:
            on_lost("another node took the lease")
            return True
        except Exception as exc:
            if self.clock() - self.renewed_at > self.lease_s / 2:
                on_lost(
                    f"the lease could not be renewed for {self.lease_s / 2:g}s ({type(exc).__name__}: {exc})"
                )
                return True
            return False

    async def announce(self, address: str) -> None:
        """Publish where this owner serves (a renewal that carries the address)."""
        self.address = address
        await self._update()
        await handover_done(self.link.kv, self.shard)

    async def release(self) -> None:
        """Give the lease up (a clean stop): a standby takes the shard without waiting a lease."""
        if self._keeper is not None:
            self._keeper.cancel()
        try:
            await self.link.kv.delete(self.key, last=self.revision)
        except Exception as exc:  # lost meanwhile: nothing to give up
            log.info("shard %d: the lease was not released (%s)", self.shard, exc)
