"""A request's job writes go to the batch at its end, in one native call (`BatchView.flush`):
whatever a request does to a job (create, change it twice, delete it, change its payload), the
store ends as if each step had been written at once: every index entry in step with its record,
and the counts with the store (real RocksDB, checked by `pyqueue check`'s own code)."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyqueue.engine.check import check
from pyqueue.engine.recovery import LAYOUT, READY_IN_RUN_ORDER
from pyqueue.engine.view import BatchView, InFlightCache, JobWriteError, indexed
from pyqueue.store import RocksStore, keys
from pyqueue.store.contract import Family
from pyqueue.store.records import IN_FLIGHT, JobRecord, Status

NOW = 1_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RocksStore]:
    s = RocksStore(tmp_path / "db")
    batch = s.batch()
    batch.put(Family.DATA, LAYOUT, READY_IN_RUN_ORDER)  # what a server writes at its first start
    s.write(batch)
    yield s
    s.close()


def new(job_id: int, queue: str = "q") -> JobRecord:
    return JobRecord(job_id, Status.READY, queue, "t", 5, NOW, NOW)


def commit(store: RocksStore, cache: InFlightCache, *requests: Callable[[BatchView], None]) -> BatchView:
    """Apply each request with a flush after it, as the writer does, then write the batch."""
    view = BatchView(store, NOW, cache)
    for request in requests:
        request(view)
        view.flush()
    store.write(view.batch)
    view.publish()
    return view


def stored_counts(store: RocksStore) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for key, raw in store.scan(Family.DATA, *keys.job_range()):
        record = JobRecord.decode(keys.id_suffix(key), raw)
        by_status = out.setdefault(record.queue, {})
        by_status[record.status.label] = by_status.get(record.status.label, 0) + 1
    return out


def claim(view: BatchView, job_id: int) -> None:
    (record,) = view.records([job_id])
    assert record is not None
    before = indexed(record)
    record.status, record.attempts, record.lease = IN_FLIGHT, record.attempts + 1, record.lease + 1
    view.save(record, before)


def finish(view: BatchView, job_id: int, status: Status) -> None:
    (record,) = view.records([job_id])
    assert record is not None
    before = indexed(record)
    record.status, record.expires_ms = status, NOW + 60_000
    view.save(record, before)


def delete(view: BatchView, job_id: int) -> None:
    (record,) = view.records([job_id])
    assert record is not None
    view.delete(record)


def test_every_path_of_a_job_through_one_request_leaves_the_store_consistent(store: RocksStore) -> None:
    cache = InFlightCache()

    def first(view: BatchView) -> None:
        view.create(new(1), b"one")
        view.create(new(2), b"two")  # created, then claimed and completed: encoded once, at its end
        claim(view, 2)
        finish(view, 2, Status.COMPLETED)
        view.create(new(3), b"three")  # created and gone again: nothing of it reaches the store
        delete(view, 3)
        view.create(new(4), b"four")
        view.set_payload(4, b"four, changed")
        view.create(new(5), b"five")
        view.create(new(6), b"six")

    commit(store, cache, first)
    assert store.get(Family.DATA, keys.job_key(3)) is None
    assert store.get(Family.DATA, keys.payload_key(4)) == b"four, changed"

    def second(view: BatchView) -> None:
        claim(view, 1)  # claimed, then deleted: its stored (ready) entries go
        delete(view, 1)
        claim(view, 5)  # claimed, then moved and put back
        (record,) = view.records([5])
        assert record is not None
        record.queue = "other"
        record.status = Status.READY
        view.save(record, indexed(record))  # a `before` that is not where the store stands
        claim(view, 6)

    view = commit(store, cache, second)
    assert view.left_flight == {"q": 1}  # 1 went in flight and out of it: the limits count it
    assert store.get(Family.DATA, keys.job_key(1)) is None

    def third(view: BatchView) -> None:
        finish(view, 6, Status.DEAD)  # out of flight (written so in the last commit)

    view = commit(store, cache, third)
    assert view.left_flight == {"q": 1}
    report = check(store)
    assert report.ok, report.problems
    assert (
        cache.counts.by_queue()
        == stored_counts(store)
        == {
            "q": {"completed": 1, "ready": 1, "dead": 1},
            "other": {"ready": 1},
        }
    )


def test_a_record_the_format_cannot_hold_is_named(store: RocksStore) -> None:
    commit(store, InFlightCache(), lambda view: view.create(new(7), b""))
    view = BatchView(store, NOW, InFlightCache())
    view.create(new(8, queue="q" * 256), b"")
    with pytest.raises(JobWriteError, match=r"job 8: .*255") as created:
        view.flush()
    assert created.value.stored_id is None  # new in this request: the job being handled made it

    view = BatchView(store, NOW, InFlightCache())
    (record,) = view.records([7])
    assert record is not None
    before = indexed(record)
    record.queue = "q" * 256
    view.create(new(9), b"")  # a good job beside it changes nothing
    view.save(record, before)
    with pytest.raises(JobWriteError, match=r"job 7: .*255") as stored:
        view.flush()
    assert stored.value.stored_id == 7


def test_a_json_document_changed_many_times_in_a_request_is_written_once_as_last_left(
    store: RocksStore,
) -> None:
    key, gone = keys.meta_key("doc"), keys.meta_key("gone")
    view = BatchView(store, NOW, InFlightCache())
    assert view.get_doc(key) is None
    view.put_doc(key, {"n": 0})
    for _ in range(3):
        doc = view.get_doc(key)
        doc["n"] += 1  # the object put: no parse, no encoding per change
        view.put_doc(key, doc)
    assert view.get_meta(key) == b'{"n":3}'  # a raw read sees it too
    view.put_doc(gone, {"x": 1})
    view.put_meta(gone, None)  # a raw write after it wins
    assert len(view.batch) == 1  # that delete: the document is not written yet
    view.flush()
    assert len(view.batch) == 2  # written once
    store.write(view.batch)
    assert store.get(Family.DATA, key) == b'{"n":3}' and store.get(Family.DATA, gone) is None

    def later(view: BatchView) -> None:
        doc = view.get_doc(key)
        doc["n"] += 1  # a fresh copy: changed but not put, so not written
        assert view.get_doc(key) == {"n": 3}

    commit(store, InFlightCache(), later)
    assert store.get(Family.DATA, key) == b'{"n":3}'
