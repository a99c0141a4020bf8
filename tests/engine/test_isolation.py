"""A job whose handling raises inside the writer is dead with the error; the rest of its request
and of its batch go on (real RocksDB, the engine driven in-process, a failpoint naming the jobs)."""

from pathlib import Path

import pytest
from taking import delivered

from pyqueue import failpoints
from pyqueue.engine import Engine, Failure
from pyqueue.store import Status


@pytest.fixture
def poison(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "poison"
    monkeypatch.setitem(failpoints._PATHS, "ack_job", str(path))
    return path


async def test_one_ack_of_many_jobs_buries_only_the_guilty_ones(engine: Engine, poison: Path) -> None:
    pairs = await delivered(engine, 200)
    guilty = {job_id for job_id, _ in pairs[::3]}  # 67 bad jobs in one request: a loop, not a recursion
    poison.write_text("\n".join(map(str, guilty)))
    outcome = await engine.ack(pairs)
    assert {job_id for job_id, _ in outcome.done} == {job_id for job_id, _ in pairs} - guilty
    assert {r.job_id for r in outcome.rejected} == guilty
    assert {r.code for r in outcome.rejected} == {"INTERNAL"}
    for job_id in guilty:
        assert engine.get_job(job_id).record.status == Status.DEAD
        (error,) = engine.list_errors(job_id)
        assert error.kind == "internal" and "injected failure" in error.message
    assert engine.memory.counts.by_queue()["q"].get("dead") == len(guilty)


async def test_a_failure_report_buries_the_guilty_job_too(engine: Engine, poison: Path) -> None:
    (first, second) = await delivered(engine, 2)
    poison.write_text(str(second[0]))
    outcome = await engine.ack([first])
    assert outcome.done == [(first[0], Status.COMPLETED)]
    outcome = await engine.ack([second])
    assert [r.code for r in outcome.rejected] == ["INTERNAL"]
    poison.unlink()
    # Dead is final: an answer for the buried attempt is refused, not applied.
    late = await engine.fail([(Failure(second[0], "late"), second[1])])
    assert [r.code for r in late.rejected] == ["FAILED_PRECONDITION"]
