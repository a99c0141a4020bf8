"""A Take stream over queues on several shards, served by the router for plain gRPC workers.

The router opens one Take per shard (that shard's queues, a share of the prefetch), writes every
job and answer the shards send to the worker, and splits each of the worker's messages by the
shard that owns each job id (a job id names its shard). The official clients open one stream per
shard themselves; this is so a worker in another language needs no routing code.

What the worker sees: at most its prefetch in flight (when the prefetch is at least the number
of shards; below that, one per shard); priority order within each shard's queues, not across
shards; one answer (AckResult, FailResult) per shard a message's jobs came from; a Stopping once
every shard has sent one.
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio

from pyqueue.cluster import shard_of_job
from pyqueue.server.status import EOF, Context
from pyqueue.v1 import queue_pb2 as pb


def shares(prefetch: int, shards: int) -> list[int]:
    """The prefetch split over the shards, each at least 1."""
    return [max(1, prefetch // shards + (1 if i < prefetch % shards else 0)) for i in range(shards)]


def split(
    message: pb.TakeRequest, shard_of: Callable[[int], int], shards: list[int]
) -> dict[int, pb.TakeRequest]:
    """One worker message as one message per shard, each with that shard's jobs only."""
    parts = {shard: pb.TakeRequest() for shard in shards}
    for name in ("start", "ack", "release"):
        if message.HasField(name):
            whole = getattr(message, name)
            for job_id, lease in zip(whole.ids, whole.leases, strict=False):
                part = getattr(parts[shard_of(job_id)], name)
                part.ids.append(job_id)
                part.leases.append(lease)
                if name == "ack" and job_id in whole.results:
                    part.results[job_id] = whole.results[job_id]
                if name == "release":
                    part.delay_ms, part.unknown_type = whole.delay_ms, whole.unknown_type
    if message.HasField("extend"):
        for job_id, lease in zip(message.extend.ids, message.extend.leases, strict=False):
            part_extend = parts[shard_of(job_id)].extend
            part_extend.ids.append(job_id)
            part_extend.leases.append(lease)
            part_extend.extend_ms = message.extend.extend_ms
    for failure in message.fail.failures:
        parts[shard_of(failure.id)].fail.failures.append(failure)
    for part in parts.values():
        part.closing, part.drained = message.closing, message.drained
    return {shard: part for shard, part in parts.items() if part.ListFields()}


async def take_across(  # noqa: C901 - one pump per direction; to split with the router's services (#33)
    stubs: list[Any],
    first: pb.TakeRequest,
    owners: dict[int, list[str]],
    context: Context,
    metadata: tuple[tuple[str, str | bytes], ...],
) -> None:
    shards = sorted(owners)
    inboxes: dict[int, asyncio.Queue[pb.TakeRequest | None]] = {s: asyncio.Queue() for s in shards}
    for shard, prefetch in zip(shards, shares(first.subscribe.prefetch or 1, len(shards)), strict=True):
        subscribe = pb.TakeRequest()
        subscribe.CopyFrom(first)
        del subscribe.subscribe.queues[:]
        subscribe.subscribe.queues.extend(owners[shard])
        subscribe.subscribe.prefetch = prefetch
        inboxes[shard].put_nowait(subscribe)

    def shard_of(job_id: int) -> int:
        shard = shard_of_job(job_id)
        return shard if shard in inboxes else shards[0]  # not ours: the shard refuses it by id

    async def requests(shard: int) -> AsyncIterator[pb.TakeRequest]:
        while (message := await inboxes[shard].get()) is not None:
            yield message

    async def pump() -> None:
        while (message := await context.read()) is not EOF:
            for shard, part in split(message, shard_of, shards).items():
                inboxes[shard].put_nowait(part)
        for inbox in inboxes.values():
            inbox.put_nowait(None)

    writing = asyncio.Lock()
    stopping: set[int] = set()

    async def relay(shard: int, call: Any) -> None:
        async for response in call:
            if response.HasField("stopping"):
                stopping.add(shard)
                if stopping != set(shards):
                    continue  # the worker stops once, when every shard stops
            async with writing:
                await context.write(response)

    calls = {shard: stubs[shard].Take(requests(shard), metadata=metadata) for shard in shards}
    pumping = asyncio.ensure_future(pump())
    relays = [asyncio.ensure_future(relay(shard, call)) for shard, call in calls.items()]
    try:
        await asyncio.gather(*relays)
    except grpc.aio.AioRpcError as exc:  # one shard's stream failed: the worker reconnects to all
        await context.abort(exc.code(), exc.details() or "")
    finally:
        pumping.cancel()
        for task in relays:
            task.cancel()
        for call in calls.values():
            call.cancel()
