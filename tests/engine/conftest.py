"""An engine on real RocksDB, started without its timed services (tests drive them)."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pyqueue.engine import Engine, EngineConfig
from pyqueue.store import RocksStore


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    store = RocksStore(tmp_path / "db")
    e = Engine(store, EngineConfig())
    await e.start(services=False)
    await e.wait_rebuilt()
    yield e
    await e.stop()
    store.close()
