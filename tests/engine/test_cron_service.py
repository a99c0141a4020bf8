"""The cron service driven step by step with an injected clock: one job per tick, never two, one
catch-up job after downtime that says what was missed, pause and resume, and refusals."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pyqueue.engine import Engine, EngineConfig
from pyqueue.engine.errors import InvalidArgument, NotFound
from pyqueue.engine.retry import JobOptions
from pyqueue.store import RocksStore

T0 = 1_800_000_000_000  # a whole minute, in ms


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def timed(tmp_path: Path) -> AsyncIterator[tuple[Engine, Clock]]:
    clock = Clock()
    store = RocksStore(tmp_path / "db")
    e = Engine(store, EngineConfig(), clock=clock)
    await e.start(services=False)
    await e.wait_rebuilt()
    yield e, clock
    await e.stop()
    store.close()


def ticks(e: Engine) -> list[dict[str, str]]:
    return [
        JobOptions.decode(e.get_job(job_id).record.options).headers or {}
        for job_id in sorted(e.memory.ready.select(["cron"]).claim(1000))
    ]


async def test_one_job_per_tick_and_one_catch_up_after_downtime(timed) -> None:  # type: ignore[no-untyped-def]
    e, clock = timed
    job = e.new_job(0, "report", "cron", None, b"{}", "application/json")
    await e.set_cron([e.cron_entry("every-10s", "*/10 * * * * *", "UTC", job)])
    clock.now = T0 + 5_000
    assert await e.cron.run_once() == 0
    clock.now = T0 + 10_000
    assert await e.cron.run_once() == 1
    assert await e.cron.run_once() == 0, "a tick goes in once"
    clock.now = T0 + 65_000  # down for 55 s: ticks 20 to 50 were missed
    assert await e.cron.run_once() == 1
    first, catch_up = ticks(e)
    assert first == {"pyqueue-cron": "every-10s", "pyqueue-cron-tick": str(T0 + 10_000)}
    assert catch_up == {
        "pyqueue-cron": "every-10s",
        "pyqueue-cron-tick": str(T0 + 60_000),
        "pyqueue-cron-missed": "4",
    }


async def test_a_tick_already_in_is_not_enqueued_again(timed) -> None:  # type: ignore[no-untyped-def]
    e, clock = timed
    (entry,) = await e.set_cron(
        [e.cron_entry("m", "* * * * *", "Europe/Paris", e.new_job(0, "t", "cron", None, b""))]
    )
    clock.now = T0 + 60_000
    assert await e.cron.run_once() == 1
    # A second service (or a retry after a crash) with the old view of the entry: the writer refuses it.
    assert await e._cron_tick(entry, T0 + 60_000, 0) is None
    assert len(ticks(e)) == 1


async def test_set_is_idempotent_and_keeps_pause_and_progress(timed) -> None:  # type: ignore[no-untyped-def]
    e, clock = timed
    entry = e.cron_entry("m", "* * * * * *", "UTC", e.new_job(0, "t", "cron", None, b""))
    await e.set_cron([entry])
    clock.now = T0 + 3_000
    assert await e.cron.run_once() == 1
    await e.change_cron("m", "pause")
    (again,) = await e.set_cron([entry])  # a worker starting again declares the same entry
    assert again.paused and again.last_tick_ms == T0 + 3_000
    clock.now = T0 + 10_000
    assert await e.cron.run_once() == 0, "paused"
    await e.change_cron("m", "resume")
    assert await e.cron.run_once() == 0, "the ticks missed while paused are not caught up"
    clock.now = T0 + 11_000
    assert await e.cron.run_once() == 1
    await e.change_cron("m", "delete")
    assert e.list_cron() == []
    with pytest.raises(NotFound):
        await e.change_cron("m", "pause")


@pytest.mark.parametrize(
    ("schedule", "timezone", "hint"),
    [
        ("* * *", "UTC", "has 3 fields"),
        ("61 * * * *", "UTC", "not a valid cron expression"),
        ("* * * * *", "Mars/Olympus", "timezone 'Mars/Olympus' is unknown"),
        ("0 0 30 2 *", "UTC", "never fires"),  # February 30
        ("* * * * *", "Europe", "timezone 'Europe' is unknown"),  # a directory of zones
        ("* * * * *", "x" * 10_000, "at most 64"),
    ],
)
async def test_bad_entries_are_refused(timed, schedule: str, timezone: str, hint: str) -> None:  # type: ignore[no-untyped-def]
    e, _ = timed
    with pytest.raises(InvalidArgument, match=hint):
        e.cron_entry("bad", schedule, timezone, e.new_job(0, "t", "cron", None, b""))
    with pytest.raises(InvalidArgument, match="name"):
        e.cron_entry("no spaces", "* * * * *", "UTC", e.new_job(0, "t", "cron", None, b""))
