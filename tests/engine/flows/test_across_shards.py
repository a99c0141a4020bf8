"""A batch whose jobs live on two shards: completions reach the batch's home through the outbox,
each counted once however often the relay carries it."""

import json
from typing import Any

from flow_engine import job, relay, take

from pyqueue.engine import Engine


async def test_members_on_another_shard_are_made_there_and_counted_at_home(two: list[Engine]) -> None:
    home, other = two
    group: Any = {
        "members": [{"job": job(home, "a")}, {"job": job(home, "bee")}, {"job": job(home, "bee")}],
        "next": {"job": job(home, "album")},
    }
    _, batch_id, _ = await home.workflows.start(group)
    assert await relay(two) == 2  # the two members of "bee" are made on shard 1
    (a,) = await take(home, "a")
    bees = sorted(await take(other, "bee", 2), key=lambda v: v.record.id)
    await home.ack([(a.record.id, a.record.lease)], {a.record.id: b'"A"'})
    for i, bee in enumerate(bees):
        await other.ack([(bee.record.id, bee.record.lease)], {bee.record.id: json.dumps(f"B{i}").encode()})
    assert home.workflows.batch(batch_id).counts["pending"] == 2  # not carried yet

    entries = await other.workflows.pull(0, 100, 0)
    assert len(entries) == 2
    # carried twice (a relay that died before it trimmed): applied once
    assert await home.workflows.take_in(1, [(seq, raw) for seq, _, raw in entries]) == 2
    assert await home.workflows.take_in(1, [(seq, raw) for seq, _, raw in entries]) == 0
    (build,) = await take(home, "album")
    from pyqueue.engine.retry import JobOptions

    flow = JobOptions.decode(build.record.options).flow
    assert flow is not None and json.loads(flow["in"]) == ["A", "B0", "B1"]
    await other.workflows.trim(entries[-1][0])
    assert await other.workflows.pull(0, 100, 0) == []


async def test_a_chain_crosses_shards_and_back(two: list[Engine]) -> None:
    zero, one = two
    step: Any = {"job": job(zero, "a"), "next": {"job": job(zero, "bee"), "next": {"job": job(zero, "c")}}}
    await zero.workflows.start(step)
    (a,) = await take(zero, "a")
    await zero.ack([(a.record.id, a.record.lease)], {a.record.id: b"1"})
    assert await relay(two) == 1
    (bee,) = await take(one, "bee")
    await one.ack([(bee.record.id, bee.record.lease)], {bee.record.id: b"2"})
    assert await relay(two) == 1
    (c,) = await take(zero, "c")
    assert c.record.type == "t"


async def test_the_outbox_sequence_survives_a_restart(two: list[Engine], tmp_path: object) -> None:
    zero, _ = two
    await zero.workflows.start({"job": job(zero, "bee")})
    first = await zero.workflows.pull(0, 10, 0)
    assert [seq for seq, _, _ in first] == [1]
    await zero.workflows.trim(1)
    zero.workflows.open()  # as at a start: the sequence goes on from the last one given
    await zero.workflows.start({"job": job(zero, "bee")})
    assert [seq for seq, _, _ in await zero.workflows.pull(0, 10, 0)] == [2]
