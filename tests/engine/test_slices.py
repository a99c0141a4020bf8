"""Large answers are written in slices, so no request holds the single writer for long."""

from taking import delivered

from pyqueue.engine import Engine, Failure
from pyqueue.engine.engine import SLICE


async def test_an_ack_of_a_whole_prefetch_is_written_in_slices(engine: Engine) -> None:
    pairs = await delivered(engine, 3 * SLICE + 1)
    before = engine.committer.commits
    outcome = await engine.ack(pairs)
    assert len(outcome.done) == len(pairs) and not outcome.rejected
    assert engine.committer.commits - before == 4  # one after the other: each its own write


async def test_failures_are_sliced_too(engine: Engine) -> None:
    pairs = await delivered(engine, SLICE + 1)
    before = engine.committer.commits
    outcome = await engine.fail([(Failure(job_id, "boom"), lease) for job_id, lease in pairs])
    assert len(outcome.done) == len(pairs)
    assert engine.committer.commits - before == 2
