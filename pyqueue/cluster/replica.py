"""A shard's local copy, kept by applying its changelog: what a standby does all the time, and a
new owner does up to the changelog's end before it serves.

The changelog sequence each write applied is written in the same batch (APPLIED), so a copy that
stops anywhere, even with its unsynced log tail lost, resumes right after what it holds.
"""

import asyncio
import logging
import time
from typing import Any

from pyqueue.cluster import changelog
from pyqueue.cluster.changelog import APPLIED, applied_sequence
from pyqueue.cluster.nats_link import NatsLink
from pyqueue.cluster.snapshots import restore
from pyqueue.store.contract import Family
from pyqueue.store.rocks import RocksStore

log = logging.getLogger("pyqueue.cluster")
FETCH = 256  # entries per fetch


class Replica:
    """Applies shard `shard`'s changelog to `store`; runs on the link's loop."""

    def __init__(self, store: RocksStore, link: NatsLink, shard: int) -> None:
        self.store = store
        self.link = link
        self.shard = shard
        self.applied = applied_sequence(store)
        self.read = self.applied  # read past `applied` by the parts of a batch not yet closed
        self._parts: list[bytes] = []
        self._subscription: Any = None
        self.entries_applied = 0
        self.applied_at = time.perf_counter()  # when the last entry was applied

    async def _subscribe(self) -> Any:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.read + 1,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30.0,
            mem_storage=True,
        )
        cfg = self.link.config
        return await self.link.js.pull_subscribe(
            cfg.subject(self.shard), stream=cfg.stream(self.shard), config=config
        )

    async def fetch(self, wait_s: float) -> int:
        """Apply what the changelog has past what was read, waiting at most `wait_s` for something
        new; how many entries were read."""
        if self._subscription is None:
            self._subscription = await self._subscribe()
        try:
            messages = await self._subscription.fetch(FETCH, timeout=wait_s)
        except TimeoutError:  # nats' own, and asyncio's from inside the fetch: nothing new
            messages = []
        except Exception as exc:  # a NATS server went away with the consumer: start one anew
            log.info(
                "shard %d: reading the changelog again from %d (%s: %s)",
                self.shard, self.read + 1, type(exc).__name__, exc,
            )  # fmt: skip
            await self._drop()
            return 0
        for message in messages:
            sequence = message.metadata.sequence.stream
            if sequence != self.read + 1:  # never skip an entry: read again from the next one
                await self._drop()
                await self.restore_if_trimmed()
                return 0
            self.take(sequence, message.data)
        if not messages:
            await self.restore_if_trimmed()
        return len(messages)

    async def restore_if_trimmed(self) -> bool:
        """If the changelog was trimmed past what this copy read (a new node, one down for long),
        replace the copy with the shard's snapshot; True if it did."""
        info = await self.link.js.stream_info(self.link.config.stream(self.shard))
        if int(info.state.first_seq) <= self.read + 1:
            return False
        await self._drop()
        path = self.store.path
        self.store.close()
        sequence = await restore(self.link, self.shard, path)
        self.store = await asyncio.to_thread(RocksStore, path, create=False)
        self.applied = self.read = sequence
        self._parts = []
        return True

    def take(self, sequence: int, entry: bytes) -> None:
        kind = entry[:1]
        self.read = sequence
        if kind == changelog.PART:
            self._parts.append(entry)
            return
        batch = self.store.batch()
        if kind == changelog.BATCH:
            for part in (*self._parts, entry):
                changelog.apply(batch, part)
            self.entries_applied += 1 + len(self._parts)
        elif kind != changelog.FENCE:
            raise changelog.DamagedEntry(
                f"entry {sequence} of shard {self.shard}'s changelog has kind {kind!r}"
            )
        self._parts = []  # a fence drops the parts of a batch whose owner died before closing it
        batch.put(Family.DATA, APPLIED, sequence.to_bytes(8, "big"))
        self.store.write(batch)
        self.applied = sequence
        self.applied_at = time.perf_counter()

    async def catch_up(self) -> int:
        """Read to the changelog's end as it is now; that end."""
        await self.restore_if_trimmed()
        info = await self.link.js.stream_info(self.link.config.stream(self.shard))
        end = int(info.state.last_seq)
        while self.read < end:
            await self.fetch(1.0)
        return end

    async def _drop(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            try:
                await subscription.unsubscribe()
            except Exception as exc:  # the connection it lived on may be gone
                log.debug("dropping a changelog consumer: %s", exc)

    async def close(self) -> None:
        await self._drop()
