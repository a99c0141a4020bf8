"""The relay: carries each shard's workflow outbox entries (engine/flows/outbox.py) to the shards
they are for; its next pull drops them at their source. One per shard, in the supervisor, over the
router's channels (which follow a shard that moves, or a cluster's owners).

An entry is dropped only after every shard it was for has applied it, and a shard applies
another's entries in sequence order and skips those it applied before: a relay that dies
between the two steps, or two relays (one per cluster node) carrying the same entries, make no
entry count twice."""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from pyqueue.engine.services.base import Service
from pyqueue.server.relay_secret import RELAY_METADATA
from pyqueue.v1 import queue_pb2 as pb


@dataclass(frozen=True, slots=True)
class RelayConfig:
    wait_ms: int = 2_000  # how long one pull waits for an entry at its source
    per_pull: int = 1_000
    retry_s: float = 0.5  # after a shard refused or did not answer
    call_s: float = 30.0


class ShardRelay(Service):
    name = "relay"

    def __init__(
        self,
        source: int,
        stub_of: Callable[[int], Any],  # an aio QueueStub: the router's, to each shard
        metadata: Sequence[tuple[str, str]] = (),
        config: RelayConfig = RelayConfig(),
    ) -> None:
        super().__init__()
        self.source = source
        self._stub_of = stub_of
        self._metadata = tuple(metadata)
        self.config = config
        self.after = 0  # the last entry carried (and applied where it went)
        self.carried = 0
        self._failures = 0

    async def run_once(self) -> int:
        """Pull what is waiting at the source (up to one pull's wait; the pull drops at the source
        what the last one carried), apply it where it goes; how many entries were carried."""
        c = self.config
        source = self._stub_of(self.source)
        answer = await source.PullOutbox(
            pb.PullOutboxRequest(after=self.after, limit=c.per_pull, wait_ms=c.wait_ms),
            timeout=c.wait_ms / 1000 + c.call_s,
            metadata=self._metadata,
        )
        if not answer.entries:
            return 0
        by_shard: dict[int, list[pb.OutboxEntry]] = {}
        for entry in answer.entries:
            by_shard.setdefault(entry.to, []).append(entry)
        await asyncio.gather(
            *(
                self._stub_of(shard).ApplyInbox(
                    pb.ApplyInboxRequest(source=self.source, entries=entries),
                    timeout=c.call_s,
                    metadata=self._metadata,
                )
                for shard, entries in by_shard.items()
            )
        )
        self.after = answer.entries[-1].seq  # the next pull drops them at the source
        self.carried += len(answer.entries)
        self._failures = 0
        return len(answer.entries)

    async def _idle(self, done: int | None, failed: bool) -> None:
        if failed:
            await asyncio.sleep(self.config.retry_s)

    def _failed(self, exc: Exception) -> None:
        # A shard restarting or a node taking over: expected, and retried; said once a streak.
        self._failures += 1
        if self._failures == 1 or self._failures % 120 == 0:
            what = (
                f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.aio.AioRpcError) else repr(exc)
            )
            self.log.warning(
                "carrying shard %d's workflow entries failed (%s); trying again (%d in a row)",
                self.source,
                what,
                self._failures,
            )


def start_relays(shards: int, stub_of: Callable[[int], Any], secret: str) -> list[ShardRelay]:
    """One relay per shard of a sharded server, started (a lone server has no one to carry to);
    its calls carry the server's secret (relay_secret.py), and no token."""
    if shards < 2:
        return []
    metadata = [(RELAY_METADATA, secret)]
    started = [ShardRelay(shard, stub_of, metadata) for shard in range(shards)]
    for relay in started:
        relay.start()
    return started


async def stop_relays(started: list[ShardRelay]) -> None:
    await asyncio.gather(*(relay.stop() for relay in started))
