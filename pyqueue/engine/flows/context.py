"""What workflow bookkeeping needs of its shard, handed to every write (`BatchView.flows`)."""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from pyqueue.engine.ids import IdGenerator, shard_of
from pyqueue.engine.retry import RetryPolicy

SEQ_META = "flows.outbox_seq"


def inbox_meta(source: int) -> str:
    """The last outbox sequence applied here from `source`."""
    return f"flows.inbox.{source}"


def last_to_meta(to: int) -> str:
    """The sequence of this shard's last outbox entry for shard `to`."""
    return f"flows.outbox_to.{to}"


@dataclass
class Flows:
    shard: int
    ids: IdGenerator
    policy: RetryPolicy
    shard_of_queue: Callable[[str], int] = lambda queue: 0
    max_input_bytes: int = 1 << 20  # what one job hands on to the next (a result, the results of a group)
    next_seq: int = 1  # the next outbox entry's sequence (set from the store at start)
    durable_seq: int = 0  # entries up to here are on disk: only they may leave the shard
    trimmed_seq: int = 0  # entries up to here were applied where they went, and dropped here
    pulled_seq: int = 0  # the last entry a pull handed out since start: no trim goes past it
    stats: dict[str, int] = field(default_factory=dict)
    _written: asyncio.Event | None = None

    def home_of(self, batch_id: int) -> int:
        return shard_of(batch_id)

    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def durable(self, seq: int) -> None:
        """After a write with outbox entries up to `seq` is on disk (on the loop): the relay may
        carry them."""
        if seq > self.durable_seq:
            self.durable_seq = seq
            if self._written is not None:
                self._written.set()

    async def wait_durable(self, after: int, timeout_s: float) -> bool:
        """Whether entries past `after` are durable, waiting up to `timeout_s` for some."""
        if self._written is None:
            self._written = asyncio.Event()
        if self.durable_seq > after:
            return True
        self._written.clear()
        try:
            async with asyncio.timeout(timeout_s):
                await self._written.wait()
        except TimeoutError:
            pass
        return self.durable_seq > after
