"""The native writes of a job (pyqueue._native.job_writes) against the key codec
(pyqueue.store.keys and the record's own methods): the same bytes, for every status, with and
without a limit key, for names of any width, and several jobs in one call."""

import itertools

import pytest

from pyqueue._native import job_writes
from pyqueue.engine.view import indexed
from pyqueue.store import keys
from pyqueue.store.records import JobRecord, Status

QUEUES = ("mail", "ünïcode", "q" * 200)


def record(**changes) -> JobRecord:  # type: ignore[no-untyped-def]
    fields = dict(
        id=0x0102030405,
        status=Status.READY,
        queue="mail",
        type="send",
        priority=3,
        created_ms=1,
        updated_ms=2,
    )
    fields.update(changes)
    return JobRecord(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "queue", "limit_key"), list(itertools.product(Status, QUEUES, ("", "cust-1")))
)
def test_a_new_job_writes_what_the_codec_says(status: Status, queue: str, limit_key: str) -> None:
    r = record(status=status, queue=queue, limit_key=limit_key, run_at_ms=11, expires_ms=22, type=queue[::-1])
    data, index, data_deletes, index_deletes = job_writes([(r, None, b"the payload", False)])
    assert data == [(keys.job_key(r.id), r.encode()), (keys.payload_key(r.id), b"the payload")]
    assert index == [
        (r.status_key(), r.status_value()),
        (keys.queue_key(r.queue, r.status, r.id), b""),
        (keys.type_key(r.type, r.id), b""),
    ]
    assert data_deletes == index_deletes == []
    assert job_writes([(r, indexed(r), None, True)]) == (
        [],
        [],
        [keys.job_key(r.id), keys.payload_key(r.id)],
        [r.status_key(), keys.queue_key(r.queue, r.status, r.id), keys.type_key(r.type, r.id)],
    )


CHANGES = [
    {"status": Status.IN_FLIGHT, "attempts": 1, "expires_ms": 99},  # a claim
    {"expires_ms": 500},  # an extension: the timer alone
    {"started_ms": 5},  # a start: the record alone
    {"priority": 9},  # re-prioritised
    {"queue": "other"},  # moved
    {"status": Status.SCHEDULED, "run_at_ms": 1234},  # a retry
    {"status": Status.COMPLETED, "expires_ms": 777},  # kept after an ack
]


@pytest.mark.parametrize("start", [Status.READY, Status.IN_FLIGHT, Status.SCHEDULED])
@pytest.mark.parametrize("change", CHANGES)
def test_a_change_moves_exactly_the_entries_that_change(start: Status, change: dict[str, object]) -> None:
    r = record(status=start, limit_key="k", run_at_ms=40, expires_ms=50)
    before = indexed(r)
    old_status_key = r.status_key()
    old_queue_key = keys.queue_key(r.queue, r.status, r.id)
    for name, value in change.items():
        setattr(r, name, value)
    data, index, data_deletes, deletes = job_writes([(r, before, None, False)])
    assert data == [(keys.job_key(r.id), r.encode())]
    assert data_deletes == []
    moved = indexed(r) != before
    new_status_key = r.status_key()
    requeued = (r.status, r.queue) != (before[0], before[3])
    want_deletes = [old_status_key] if moved and old_status_key != new_status_key else []
    want_index = [(new_status_key, r.status_value())] if moved else []
    if requeued:
        want_deletes.append(old_queue_key)
        want_index.append((keys.queue_key(r.queue, r.status, r.id), b""))
    assert (index, deletes) == (want_index, want_deletes)


def test_one_call_writes_many_jobs_each_as_alone() -> None:
    created = record(id=1)
    claimed = record(id=2)
    before = indexed(claimed)
    claimed.status, claimed.attempts = Status.IN_FLIGHT, 1
    gone = record(id=3, status=Status.IN_FLIGHT)
    changes = [
        (created, None, b"p1", False),
        (claimed, before, None, False),
        (gone, indexed(gone), None, True),
    ]
    together = job_writes(changes)  # type: ignore[arg-type]
    alone = [job_writes([change]) for change in changes]  # type: ignore[list-item]
    for part in range(4):
        assert sorted(together[part]) == sorted(x for one in alone for x in one[part])  # type: ignore[type-var]


def test_a_name_the_format_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="past the key format's 255"):
        job_writes([(record(queue="q" * 256), None, b"", False)])
    with pytest.raises(ValueError, match="past the key format's 255"):
        r = record(type="t" * 256)
        job_writes([(r, indexed(r), None, True)])
    with pytest.raises(ValueError):
        keys.queue_key("q" * 256, 2, 1)  # the Python codec refuses it too
