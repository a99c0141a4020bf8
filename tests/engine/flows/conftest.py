"""Engines on real RocksDB for workflow tests: one shard, or two (flow_engine.queue_shard)."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from flow_engine import queue_shard

from pyqueue.engine import Engine, EngineConfig
from pyqueue.engine.retry import RetryPolicy
from pyqueue.store import RocksStore


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
