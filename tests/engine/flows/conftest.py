"""Engines on real RocksDB for workflow tests: one shard, or two with queues split by name (a
queue whose name starts with "b" lives on shard 1) and a relay the test drives by hand."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pyqueue.engine import Engine, EngineConfig
from pyqueue.engine.flows import job_to_dict
from pyqueue.engine.retry import RetryPolicy
from pyqueue.store import RocksStore


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


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    store = RocksStore(tmp_path / "db")
    e = Engine(store, EngineConfig(retry=RetryPolicy(max_retries=0, keep_dead_ms=60_000)))
    await e.start(services=False)
    await e.wait_rebuilt()
    yield e
    await e.stop()
    store.close()


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[list[Engine]]:
    engines, stores = [], []
    for shard in range(2):
        store = RocksStore(tmp_path / f"db{shard}")
        config = EngineConfig(
            shard=shard, queue_shard=queue_shard, retry=RetryPolicy(max_retries=0, keep_dead_ms=60_000)
        )
        e = Engine(store, config)
        await e.start(services=False)
        await e.wait_rebuilt()
        engines.append(e)
        stores.append(store)
    yield engines
    for e, store in zip(engines, stores, strict=True):
        await e.stop()
        store.close()
