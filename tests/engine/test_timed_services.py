"""The scheduler, reaper and purger driven step by step with an injected clock (real RocksDB)."""

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pyqueue.engine import Engine, EngineConfig, Failure
from pyqueue.engine.retry import RetryPolicy
from pyqueue.store import Family, RocksStore, Status

T0 = 1_800_000_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def engine(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Engine]:
    store = RocksStore(tmp_path / "db")
    policy = RetryPolicy(
        max_retries=2, base_s=10, exponent=0, jitter_s=0, keep_completed_ms=0, keep_dead_ms=60_000
    )
    e = Engine(store, EngineConfig(retry=policy), clock=clock)
    await e.start(services=False)
    await e.wait_rebuilt()
    yield e
    await e.stop()
    store.close()


async def add(e: Engine, *jobs) -> list[int]:  # type: ignore[no-untyped-def]
    return [job_id for job_id, _ in await e.enqueue(jobs)]


def job(e: Engine, **options):  # type: ignore[no-untyped-def]
    return e.new_job(0, "t", "q", None, b"", **options)


async def test_scheduler_promotes_only_what_is_due(engine: Engine, clock: FakeClock) -> None:
    scheduler = engine.services[0]
    later, sooner = await add(engine, job(engine, delay_ms=5_000), job(engine, delay_ms=1_000))
    assert engine.get_job(sooner).record.status == Status.SCHEDULED
    assert await scheduler.run_once() == 0
    clock.now += 1_000
    assert await scheduler.run_once() == 1
    assert engine.get_job(sooner).record.status == Status.READY
    assert engine.get_job(later).record.status == Status.SCHEDULED
    clock.now += 4_000
    assert await scheduler.run_once() == 1
    assert engine.get_job(later).record.status == Status.READY


async def test_a_past_run_at_is_ready_at_once(engine: Engine, clock: FakeClock) -> None:
    (job_id,) = await add(engine, job(engine, run_at_ms=clock.now - 1))
    assert engine.get_job(job_id).record.status == Status.READY


async def test_failures_retry_after_the_backoff_then_die_with_their_history(
    engine: Engine, clock: FakeClock
) -> None:
    (job_id,) = await add(engine, job(engine))
    for attempt in (1, 2, 3):
        consumer = engine.consumer(["q"], 1)
        (delivered,) = await consumer.next_jobs(0.5)
        assert delivered.record.attempts == attempt
        failure = Failure(job_id, f"boom {attempt}", "ValueError", "trace")
        outcome = await consumer.fail([(failure, delivered.record.lease)])
        consumer.close(clean=True)
        record = engine.get_job(job_id).record
        if attempt < 3:
            assert record.status == Status.SCHEDULED
            assert record.run_at_ms == clock.now + 11_000  # attempt^0 + 10 s, no jitter
            clock.now = record.run_at_ms
            assert await engine.services[0].run_once() == 1
        else:
            assert outcome.done == [(job_id, Status.DEAD)]
            assert record.status == Status.DEAD
    errors = engine.list_errors(job_id)
    assert [(e.attempt, e.message, e.error_type) for e in errors] == [
        (1, "boom 1", "ValueError"),
        (2, "boom 2", "ValueError"),
        (3, "boom 3", "ValueError"),
    ]


async def test_reaper_fails_an_attempt_whose_lease_ran_out(engine: Engine, clock: FakeClock) -> None:
    (job_id,) = await add(engine, job(engine, timeout_ms=2_000))
    consumer = engine.consumer(["q"], 1)
    (delivered,) = await consumer.next_jobs(0.5)
    reaper = engine.services[1]
    clock.now += 1_999
    assert await reaper.run_once() == 0
    clock.now += 1
    assert await reaper.run_once() == 1
    record = engine.get_job(job_id).record
    assert record.status == Status.SCHEDULED
    assert engine.list_errors(job_id)[0].kind == "timeout"
    late = await consumer.ack([(job_id, delivered.record.lease)])
    assert late.done == [] and late.rejected[0].code == "FAILED_PRECONDITION"


async def test_an_extension_never_outlives_the_time_limit(engine: Engine, clock: FakeClock) -> None:
    (job_id,) = await add(engine, job(engine, timeout_ms=2_000))
    consumer = engine.consumer(["q"], 1)  # reports no starts: the attempt starts at delivery
    (delivered,) = await consumer.next_jobs(0.5)
    attempt = (job_id, delivered.record.lease)
    clock.now += 500
    assert await consumer.extend([attempt], 60_000) == []  # capped at start + 2 s: nothing moves
    assert engine.get_job(job_id).record.expires_ms == T0 + 2_000
    clock.now = T0 + 1_999
    assert await engine.services[1].run_once() == 0
    clock.now = T0 + 2_000
    assert await engine.services[1].run_once() == 1
    assert engine.list_errors(job_id)[0].kind == "timeout"
    assert (await consumer.ack([attempt])).rejected[0].code == "FAILED_PRECONDITION"


async def test_the_time_limit_runs_from_the_start_when_starts_are_reported(
    engine: Engine, clock: FakeClock
) -> None:
    (job_id,) = await add(engine, job(engine, timeout_ms=2_000))
    consumer = engine.consumer(["q"], 1, reports_starts=True)
    (delivered,) = await consumer.next_jobs(0.5)
    assert delivered.record.expires_ms == 0, "prefetched: no deadline until it starts"
    clock.now += 5_000
    started = clock.now
    consumer.start([(job_id, delivered.record.lease)])
    await engine.wait_background()
    # The worker keeps the limit itself and answers at it; the server's backstop waits the grace
    # more, so a live worker's own outcome (its error, its backtrace) is the one recorded.
    grace = engine.config.time_limit_grace_ms
    assert grace > 0
    assert engine.get_job(job_id).record.expires_ms == started + 2_000 + grace
    reaper = engine.services[1]
    clock.now = started + 2_000 + grace - 1
    assert await reaper.run_once() == 0
    clock.now += 1
    assert await reaper.run_once() == 1
    assert engine.list_errors(job_id)[0].kind == "timeout"


async def test_purger_deletes_dead_jobs_when_their_retention_ends(engine: Engine, clock: FakeClock) -> None:
    (job_id,) = await add(engine, job(engine))
    consumer = engine.consumer(["q"], 1)
    (delivered,) = await consumer.next_jobs(0.5)
    await consumer.fail([(Failure(job_id, "fatal", kill=True), delivered.record.lease)])
    purger = engine.services[2]
    assert await purger.run_once() == 0
    clock.now += 60_000
    assert await purger.run_once() == 1
    with pytest.raises(Exception, match="does not exist"):
        engine.get_job(job_id)
    assert list(engine.store.scan(Family.DATA, b"E", b"F")) == [], "its error records went with it"


async def test_completed_jobs_kept_for_their_retention(engine: Engine, clock: FakeClock) -> None:
    (job_id,) = await add(engine, job(engine, keep_completed_ms=5_000))
    consumer = engine.consumer(["q"], 1)
    (delivered,) = await consumer.next_jobs(0.5)
    await consumer.ack([(job_id, delivered.record.lease)])
    assert engine.get_job(job_id).record.status == Status.COMPLETED
    clock.now += 5_000
    assert await engine.services[2].run_once() == 1
    with pytest.raises(Exception, match="does not exist"):
        engine.get_job(job_id)


def test_default_backoff_adds_up_to_about_three_weeks() -> None:
    policy = RetryPolicy()
    assert policy.delay_ms(1, rng=random.Random(0)) >= 16_000
    total_days = sum(policy.delay_ms(a) for a in range(1, 26)) / 86_400_000
    assert 18 < total_days < 25
    assert not policy.is_exhausted(25, -1) and policy.is_exhausted(26, -1)


def test_the_backoff_saturates_at_the_longest_span() -> None:
    from pyqueue.engine.ranges import LONGEST_MS

    policy = RetryPolicy(base_s=365 * 24 * 3600, exponent=10, jitter_s=24 * 3600)
    assert policy.delay_ms(10_001) == LONGEST_MS
    assert RetryPolicy(exponent=1e308).delay_ms(2) == LONGEST_MS


def test_the_servers_clock_ignores_a_step_of_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from pyqueue.engine.model import system_clock

    before = system_clock()
    stepped = time.time_ns() - 25 * 3600 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: stepped)  # the wall clock jumps back 25 hours
    after = system_clock()
    assert 0 <= after - before < 60_000, "the server's time moves on as before"
