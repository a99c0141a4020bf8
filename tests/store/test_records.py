import pytest

from pyqueue.store import keys
from pyqueue.store.records import CorruptRecordError, JobRecord, Status, decode_status_value


def record(**changes) -> JobRecord:  # type: ignore[no-untyped-def]
    fields = dict(
        id=7, status=Status.READY, queue="mail", type="send", priority=3, created_ms=1, updated_ms=2
    )
    fields.update(changes)
    return JobRecord(**fields)  # type: ignore[arg-type]


def test_round_trip_every_field() -> None:
    r = record(
        attempts=4,
        max_retries=9,
        lost=2,
        lease=77,
        timeout_ms=5000,
        run_at_ms=123,
        expires_ms=456,
        content_type="application/json",
        unique_key="u-1",
        options=b'{"x":1}',
        queue="ünï",
        type="t.x",
    )
    assert JobRecord.decode(7, r.encode()) == r


def test_corrupt_records_say_so() -> None:
    with pytest.raises(CorruptRecordError, match="job 7"):
        JobRecord.decode(7, b"\x01\x02")
    with pytest.raises(CorruptRecordError, match="version"):
        JobRecord.decode(7, b"\x09" + record().encode()[1:])


def test_a_record_decodes_to_the_status_member_and_unknown_codes_are_damage() -> None:
    r = record(status=Status.IN_FLIGHT, started_ms=9, limit_key="cust-1")
    decoded = JobRecord.decode(7, r.encode())
    assert decoded.status is Status.IN_FLIGHT and decoded.status.label == "in_flight"
    assert (decoded.started_ms, decoded.limit_key) == (9, "cust-1")
    unknown = bytearray(r.encode())
    unknown[1] = 42  # the status byte
    with pytest.raises(CorruptRecordError, match=r"job 7: .*status code 42"):
        JobRecord.decode(7, bytes(unknown))
    with pytest.raises(CorruptRecordError, match="ends inside its limit key"):
        JobRecord.decode(7, r.encode()[:-1])


def test_counters_saturate_and_oversized_fields_are_refused() -> None:
    decoded = JobRecord.decode(7, record(attempts=70_000, lost=2**20, errors=65_536).encode())
    assert (decoded.attempts, decoded.lost, decoded.errors) == (65_535, 65_535, 65_535)
    with pytest.raises(ValueError, match="queue is 70000 bytes"):
        record(queue="q" * 70_000).encode()
    with pytest.raises(OverflowError):
        record(priority=2**16).encode()


def test_status_value_carries_what_the_rebuild_needs() -> None:
    # The timer is the time that matters in the status: due time when scheduled, else expiry.
    assert decode_status_value(record(status=Status.SCHEDULED, run_at_ms=99).status_value()) == (
        3,
        99,
        "mail",
    )
    assert decode_status_value(record(status=Status.DEAD, run_at_ms=5, expires_ms=77).status_value()) == (
        3,
        77,
        "mail",
    )


def test_keys_sort_by_id_and_names_do_not_run_into_each_other() -> None:
    assert keys.job_key(1) < keys.job_key(2) < keys.job_key(256)
    prefix = keys.queue_prefix("mail", Status.DEAD)
    assert keys.queue_key("mail", Status.DEAD, 2**64 - 1).startswith(prefix)
    assert not keys.queue_key("mailer", Status.DEAD, 1).startswith(prefix)
    assert not keys.queue_key("mail", Status.READY, 1).startswith(prefix)
    lo, hi = keys.status_range(Status.READY)
    assert lo <= keys.status_key(Status.READY, 5, "mail", 3) < hi
    assert not lo <= keys.status_key(Status.IN_FLIGHT, 5, "mail", 3) < hi
    assert keys.id_suffix(keys.type_key("t", 12345)) == 12345
    assert keys.error_key(1, 2) < keys.error_key(1, 10) < keys.error_range(1)[1]


def test_ready_keys_sort_in_run_order_queue_by_queue() -> None:
    ready = [
        keys.status_key(Status.READY, job_id, queue, priority)
        for queue, priority, job_id in [("mail", 1, 9), ("mail", 0, 20), ("mailer", 0, 1), ("mail", 1, 3)]
    ]
    assert [keys.split_ready_key(k) for k in sorted(ready)] == [
        ("mail", 0, 20),
        ("mail", 1, 3),
        ("mail", 1, 9),
        ("mailer", 0, 1),
    ]
    assert keys.ready_prefix("mail") < keys.status_key(Status.READY, 0, "mail", 0)
    assert keys.status_key(Status.READY, 7, "mail", 2**16 - 1) < keys.after_ready_queue("mail")
    assert keys.after_ready_queue("mail") < keys.status_key(Status.READY, 1, "mailer", 0)
    assert keys.id_suffix(keys.status_key(Status.READY, 77, "mail", 4)) == 77
    assert not keys.is_old_ready_key(keys.status_key(Status.READY, 77, "m", 4))
