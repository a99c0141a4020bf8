"""Nothing leaks: a finished batch's bookkeeping goes with its jobs' retention (at once for a
batch that succeeded with --keep-completed 0; after --keep-dead for one with dead jobs), and a
cancelled workflow's mark after --keep-dead; the sweeper drops them, driven by an injected clock."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from flow_engine import job, take

from pyqueue.engine import Engine, EngineConfig
from pyqueue.engine.model import Failure
from pyqueue.engine.retry import RetryPolicy
from pyqueue.store import RocksStore, keys
from pyqueue.store.contract import Family

KEEP_DEAD_MS = 60_000


@pytest.fixture
async def clocked(tmp_path: Path) -> AsyncIterator[tuple[Engine, list[int]]]:
    now = [1_800_000_000_000]
    store = RocksStore(tmp_path / "db")
    e = Engine(
        store, EngineConfig(retry=RetryPolicy(max_retries=0, keep_dead_ms=KEEP_DEAD_MS)), clock=lambda: now[0]
    )
    await e.start(services=False)
    await e.wait_rebuilt()
    yield e, now
    await e.stop()
    store.close()


def bookkeeping(e: Engine) -> list[bytes]:
    """Every workflow key left in the store (batches, members, marks)."""
    return [k for k, _ in e.store.scan(Family.DATA, b"Wb", b"Wn")] + [
        k for k, _ in e.store.scan(Family.INDEX, b"Wx", b"Wy")
    ]


async def test_a_batch_that_succeeded_leaves_nothing(clocked: tuple[Engine, list[int]]) -> None:
    e, _ = clocked
    await e.workflows.start({"members": [{"job": job(e, "m")} for _ in range(3)]})
    assert bookkeeping(e)
    views = await take(e, "m", 3)
    await e.ack([(v.record.id, v.record.lease) for v in views])
    assert bookkeeping(e) == []


async def test_a_batch_with_dead_jobs_is_kept_as_long_as_they_are(clocked: tuple[Engine, list[int]]) -> None:
    e, now = clocked
    _, batch_id, _ = await e.workflows.start({"members": [{"job": job(e, "m")} for _ in range(2)]})
    ok, bad = await take(e, "m", 2)
    await e.ack([(ok.record.id, ok.record.lease)])
    await e.fail([(Failure(bad.record.id, "boom"), bad.record.lease)])
    assert e.workflows.batch(batch_id).expires_ms == now[0] + KEEP_DEAD_MS
    assert await e.sweeper.run_once() == 0  # not yet
    now[0] += KEEP_DEAD_MS
    assert await e.sweeper.run_once() == 1
    assert bookkeeping(e) == []
    assert e.store.get(Family.DATA, keys.batch_key(batch_id)) is None


async def test_a_cancelled_workflow_s_mark_goes_after_keep_dead(clocked: tuple[Engine, list[int]]) -> None:
    e, now = clocked
    flow_id, _, _ = await e.workflows.start({"job": job(e, "m")})
    await e.workflows.cancel(flow_id)
    assert e.store.get(Family.DATA, keys.cancelled_flow_key(flow_id)) is not None
    now[0] += KEEP_DEAD_MS
    assert await e.sweeper.run_once() == 1
    assert e.store.get(Family.DATA, keys.cancelled_flow_key(flow_id)) is None
    assert bookkeeping(e) == []
