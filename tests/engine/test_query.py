"""Listing jobs by filter a page at a time, forwards and back by cursor; bad limits and cursors refused."""

import pytest

from pyqueue.engine import Engine, InvalidArgument, NewJob, query

JOBS = 107


async def _fill(engine: Engine) -> list[int]:
    jobs = [NewJob(type="t", queue=f"q{i % 3}", priority=1, payload=b"%d" % i) for i in range(JOBS)]
    return [job_id for job_id, _ in await engine.enqueue(jobs)]


async def test_pages_and_cursors_walk_both_ways(engine: Engine) -> None:
    ids = await _fill(engine)
    f = query.JobFilter(queues=("q1",))
    want = ids[1::3]
    seen, cursor = [], ""
    while True:
        page = await engine.list_jobs(f, 10, False, cursor)
        seen += [j.record.id for j in page.jobs]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert seen == want
    back = await engine.list_jobs(f, 10, False, page.prev_cursor)
    assert [j.record.id for j in back.jobs] == want[-10 - len(page.jobs) : -len(page.jobs)]


async def test_a_bad_limit_or_cursor_is_refused_before_anything_is_read(engine: Engine) -> None:
    with pytest.raises(InvalidArgument, match="limit"):
        await engine.list_jobs(query.JobFilter(), query.MAX_LIMIT + 1, False, "")
    with pytest.raises(InvalidArgument, match="cursor"):
        await engine.list_jobs(query.JobFilter(), 10, False, "zz")
