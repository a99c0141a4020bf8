"""The relay's two ends hold their order on their own: a shard applies another's entries only
in the order they were made for it (one left out is refused, nothing written), and a pull drops
at its source only what a pull handed out."""

import json

import pytest
from flow_engine import job, relay, take

from pyqueue.engine import Engine
from pyqueue.engine.errors import FailedPrecondition, NotFound
from pyqueue.engine.query import JobFilter
from pyqueue.store.records import Status


async def test_an_entry_left_out_is_refused_and_the_rest_applies_once_it_comes(two: list[Engine]) -> None:
    zero, one = two
    for _ in range(3):
        await zero.workflows.start({"job": job(zero, "bee")})
    entries = await zero.workflows.pull(0, 10, 0)
    assert [json.loads(raw)["p"] for _, _, raw in entries] == [0, 1, 2]  # each names the one before
    carried = [(seq, raw) for seq, _, raw in entries]
    with pytest.raises(FailedPrecondition, match="none left out"):
        await one.workflows.take_in(0, [carried[0], carried[2]])
    assert (
        await one.count_jobs(JobFilter(queues=("bee",))) == 0
    )  # the refusal wrote nothing, not even the first
    assert await one.workflows.take_in(0, carried) == 3
    assert len(await take(one, "bee", 3)) == 3


async def test_entries_for_other_shards_leave_no_gap(two: list[Engine]) -> None:
    zero, one = two
    await zero.workflows.start({"job": job(zero, "bee")})
    await zero.workflows.start({"job": job(zero, "a"), "next": {"job": job(zero, "bee")}})
    (a,) = await take(zero, "a")
    await zero.ack([(a.record.id, a.record.lease)], {a.record.id: b"1"})  # its next goes to shard 1
    assert await relay(two) == 2
    assert len(await take(one, "bee", 2)) == 2


async def test_a_pull_drops_only_what_a_pull_handed_out(two: list[Engine]) -> None:
    zero, _ = two
    await zero.workflows.start({"job": job(zero, "bee")})
    await zero.workflows.start({"job": job(zero, "bee")})
    # A pull that says it carried everything, before anything was handed out: nothing dropped.
    first = await zero.workflows.pull(2**63, 10, 0)
    assert first == []
    assert [seq for seq, _, _ in await zero.workflows.pull(0, 1, 0)] == [1]
    await zero.workflows.pull(2**63, 10, 0)  # drops entry 1 (handed out), never entry 2
    assert [seq for seq, _, _ in await zero.workflows.pull(0, 10, 0)] == [2]


async def test_a_workflow_whose_next_step_is_on_its_way_is_found_and_cancelled(two: list[Engine]) -> None:
    """The step's job before it is gone (completed, not kept) and the step not yet carried to its
    shard: the outbox is the one trace of the workflow, and the cancel still finds it."""
    zero, one = two
    flow_id, _, _ = await zero.workflows.start({"job": job(zero, "a"), "next": {"job": job(zero, "bee")}})
    (a,) = await take(zero, "a")
    await zero.ack([(a.record.id, a.record.lease)], {a.record.id: b"1"})  # gone; its next is in the outbox
    with pytest.raises(NotFound):
        await one.workflows.cancel(flow_id)  # shard 1 knows nothing of it yet
    await zero.workflows.cancel(flow_id)
    await one.workflows.cancel(flow_id, known_elsewhere=True)  # as the router marks it
    assert await relay(two) == 1
    assert await one.count_jobs(JobFilter(queues=("bee",), statuses=(Status.CANCELLED,))) == 1
