"""Workflow rules on one shard: chains hand results on, batches count each job once and fire
each callback once, dead jobs stop a chain until retried."""

import json
from typing import Any

from flow_engine import job, take

from pyqueue.engine import Engine
from pyqueue.engine.model import Failure
from pyqueue.store.records import Status


def given(view: object) -> object:
    from pyqueue.engine.retry import JobOptions

    flow = JobOptions.decode(view.record.options).flow  # type: ignore[attr-defined]
    return json.loads(flow["in"]) if flow and "in" in flow else None


async def test_a_chain_runs_its_steps_in_order_each_given_the_last_result(engine: Engine) -> None:
    step: Any = {
        "job": job(engine, "a"),
        "next": {"job": job(engine, "b"), "next": {"job": job(engine, "c")}},
    }
    _, batch_id, first = await engine.workflows.start(step)
    assert batch_id == 0 and first
    (a,) = await take(engine, "a")
    assert a.record.id == first and given(a) is None
    assert engine.memory.counts.by_queue().get("b") is None  # b waits for a
    await engine.ack([(a.record.id, a.record.lease)], {a.record.id: b"[1, 2]"})
    (b,) = await take(engine, "b")
    assert given(b) == [1, 2]
    await engine.ack([(b.record.id, b.record.lease)], {b.record.id: b'"two"'})
    (c,) = await take(engine, "c")
    assert given(c) == "two"


async def test_a_dead_step_stops_its_chain_and_a_retry_takes_it_up(engine: Engine) -> None:
    step: Any = {"job": job(engine, "a"), "next": {"job": job(engine, "b")}}
    flow_id, _, _ = await engine.workflows.start(step)
    (a,) = await take(engine, "a")
    await engine.fail([(Failure(a.record.id, "boom"), a.record.lease)])
    assert engine.get_job(a.record.id).record.status == Status.DEAD
    assert "b" not in engine.memory.counts.by_queue()
    outcome = await engine.workflows.retry(flow_id)
    assert [job_id for job_id, _ in outcome.done] == [a.record.id]
    (a2,) = await take(engine, "a")
    await engine.ack([(a2.record.id, a2.record.lease)], {a2.record.id: b"7"})
    (b,) = await take(engine, "b")
    assert given(b) == 7


async def test_a_batch_fires_on_complete_with_its_dead_jobs_then_on_success_after_a_retry(
    engine: Engine,
) -> None:
    group: Any = {
        "members": [{"job": job(engine, "m")} for _ in range(3)],
        "on_complete": {"job": job(engine, "done")},
        "on_success": {"job": job(engine, "ok")},
        "next": {"job": job(engine, "album")},
    }
    flow_id, batch_id, _ = await engine.workflows.start(group)
    assert batch_id == flow_id
    members = await take(engine, "m", 3)
    first, second, third = sorted(members, key=lambda v: v.record.id)
    await engine.ack([(first.record.id, first.record.lease)], {first.record.id: b'"r0"'})
    # at-least-once: an ack sent again is refused, and counts nothing
    again = await engine.ack([(first.record.id, first.record.lease)], {first.record.id: b'"r0"'})
    assert again.rejected
    await engine.fail([(Failure(second.record.id, "boom"), second.record.lease)])
    assert engine.workflows.batch(batch_id).counts["pending"] == 1
    await engine.ack([(third.record.id, third.record.lease)], {third.record.id: b'"r2"'})
    status = engine.workflows.batch(batch_id)
    assert status.counts == {"pending": 0, "completed": 2, "dead": 1, "cancelled": 0, "deleted": 0}
    assert status.fired == ("complete",) and status.dead_jobs == (second.record.id,)
    (done,) = await take(engine, "done")
    summary = given(done)
    assert summary["dead_jobs"] == [second.record.id] and summary["completed"] == 2  # type: ignore[index]
    assert "ok" not in engine.memory.counts.by_queue()

    await engine.workflows.retry(flow_id)
    assert engine.workflows.batch(batch_id).counts["pending"] == 1
    (second2,) = await take(engine, "m")
    await engine.ack([(second2.record.id, second2.record.lease)], {second2.record.id: b'"r1"'})
    (ok,) = await take(engine, "ok")
    (album,) = await take(engine, "album")
    assert given(album) == ["r0", "r1", "r2"]  # a chord: the results in the members' order
    assert given(ok)["completed"] == 3  # type: ignore[index]
    counts = engine.memory.counts.by_queue()
    assert counts["done"].get("in_flight") == 1 and counts["ok"].get("in_flight") == 1  # each fired once


async def test_a_member_deleted_by_hand_finishes_its_batch_and_says_so(engine: Engine) -> None:
    from pyqueue.engine.query import JobFilter

    group: Any = {
        "members": [{"job": job(engine, "m")} for _ in range(2)],
        "on_complete": {"job": job(engine, "done")},
    }
    _, batch_id, _ = await engine.workflows.start(group)
    (one, other) = await take(engine, "m", 2)
    await engine.ack([(one.record.id, one.record.lease)])
    await engine.delete_jobs(JobFilter(ids=(other.record.id,)))
    status = engine.workflows.batch(batch_id)
    assert status.counts["deleted"] == 1 and status.fired == ("complete",)
    (done,) = await take(engine, "done")
    assert given(done)["deleted_jobs"] == [other.record.id]  # type: ignore[index]


async def test_cancelling_a_workflow_cancels_what_has_not_run_and_fires_nothing(engine: Engine) -> None:
    group: Any = {
        "members": [{"job": job(engine, "m")} for _ in range(3)],
        "on_complete": {"job": job(engine, "done")},
    }
    flow_id, batch_id, _ = await engine.workflows.start(group)
    (running,) = await take(engine, "m")
    await engine.workflows.cancel(flow_id)
    status = engine.workflows.batch(batch_id)
    assert status.cancelled and status.counts["cancelled"] == 2 and status.counts["pending"] == 1
    await engine.ack([(running.record.id, running.record.lease)])  # cancelled in flight: ends cancelled
    status = engine.workflows.batch(batch_id)
    assert status.counts["cancelled"] == 3 and status.fired == ()
    assert "done" not in engine.memory.counts.by_queue()


async def test_an_empty_group_fires_at_once(engine: Engine) -> None:
    group: Any = {"members": [], "on_success": {"job": job(engine, "ok")}}
    await engine.workflows.start(group)
    (ok,) = await take(engine, "ok")
    assert given(ok)["total"] == 0  # type: ignore[index]
