"""Folding: payloads with a fold key join the waiting job of their queue, which keeps its place,
until the rule (most payloads, the payload limit, the job's delivery) starts a new one."""

import json

import pytest
from flow_engine import take

from pyqueue.engine import Engine
from pyqueue.engine.errors import InvalidArgument
from pyqueue.engine.model import NewJob

JSON = "application/json"


def fold(e: Engine, value: object, key: str = "digest", most: int = 0, queue: str = "q") -> NewJob:
    return e.new_job(0, "t", queue, None, json.dumps(value).encode(), JSON, fold_key=key, fold_max=most)


async def test_payloads_fold_into_the_waiting_job_until_it_holds_its_most(engine: Engine) -> None:
    first = await engine.enqueue([fold(engine, {"n": 1}, most=3)])
    more = await engine.enqueue([fold(engine, {"n": 2}, most=3), fold(engine, {"n": 3}, most=3)])
    (job_id, duplicate) = first[0]
    assert not duplicate and more == [(job_id, True), (job_id, True)]
    fourth = await engine.enqueue([fold(engine, {"n": 4}, most=3)])
    assert fourth[0][0] != job_id and not fourth[0][1]  # full: a new job
    other_key = await engine.enqueue([fold(engine, {"n": 5}, key="other")])
    assert other_key[0][0] not in (job_id, fourth[0][0])
    (taken, *_) = sorted(await take(engine, "q", 3), key=lambda v: v.record.id)
    assert taken.record.id == job_id and json.loads(taken.payload) == [{"n": 1}, {"n": 2}, {"n": 3}]


async def test_a_delivered_job_takes_no_more_and_a_new_one_starts(engine: Engine) -> None:
    (first,) = await engine.enqueue([fold(engine, "a")])
    (taken,) = await take(engine, "q")
    (second,) = await engine.enqueue([fold(engine, "b")])
    assert second[0] != first[0] and not second[1]
    await engine.ack(
        [(taken.record.id, taken.record.lease)]
    )  # the first job goes: its key stays the second's
    (third,) = await engine.enqueue([fold(engine, "c")])
    assert third == (second[0], True)


def test_a_fold_that_cannot_be_is_refused(engine: Engine) -> None:
    with pytest.raises(InvalidArgument, match="must be JSON"):
        engine.new_job(0, "t", "q", None, b"raw", "application/octet-stream", fold_key="k")
    with pytest.raises(InvalidArgument, match="not both"):
        engine.new_job(0, "t", "q", None, b"1", JSON, fold_key="k", unique_key="u")
    with pytest.raises(InvalidArgument, match="without a fold_key"):
        engine.new_job(0, "t", "q", None, b"1", JSON, fold_max=3)
