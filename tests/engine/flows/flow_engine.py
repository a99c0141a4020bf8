"""Helpers of the engine workflow tests: a job step's job, taking jobs, and a relay driven by hand.
With two shards, a queue whose name starts with "b" lives on shard 1."""

from typing import Any

from pyqueue.engine import Engine
from pyqueue.engine.flows import job_to_dict


def queue_shard(queue: str) -> int:
    return 1 if queue.startswith("b") else 0


def job(e: Engine, queue: str = "q", type_: str = "t", **options: Any) -> dict[str, Any]:
    return job_to_dict(e.new_job(0, type_, queue, None, b'{"args":[]}', "application/json", **options))


async def take(e: Engine, queue: str, n: int = 1) -> list[Any]:
    """n jobs of `queue`, taken on a consumer of their own."""
    consumer = e.consumer([queue], n)
    views: list[Any] = []
    while len(views) < n:
        views += await consumer.next_jobs(5)
    return views


async def relay(shards: list[Engine]) -> int:
    """Carry every durable outbox entry to its shard, as the server's relay does; how many."""
    carried = 0
    for source, e in enumerate(shards):
        entries = await e.workflows.pull(0, 10_000, 0)
        if not entries:
            continue
        for dest, target in enumerate(shards):
            mine = [(seq, raw) for seq, to, raw in entries if to == dest]
            if mine:
                carried += await target.workflows.take_in(source, mine)
        await e.workflows.trim(entries[-1][0])
    return carried
