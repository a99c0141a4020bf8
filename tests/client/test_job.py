"""`Job.from_pb`, the one way a job read from the wire becomes a Job (listings, lookups, every job
pushed to a worker): every field of the message set to a value of its own must land in the
attribute of its name, and a payload decodes from any of JSON's encodings or is kept raw with why."""

from dataclasses import fields
from datetime import UTC, datetime

import pytest

from pyqueue.client import codec
from pyqueue.client.job import Job
from pyqueue.v1 import queue_pb2 as pb

# One distinct value per field; the times a millisecond apart so that none can stand in for another.
EVERY_FIELD = pb.Job(
    id=11,
    type="mail.send",
    queue="mail",
    priority=7,
    payload=b'{"to":"a@example.com"}',
    content_type=codec.JSON,
    status=pb.JOB_STATUS_IN_FLIGHT,
    attempts=3,
    created_at_ms=1_765_000_000_001,
    updated_at_ms=1_765_000_000_002,
    run_at_ms=1_765_000_000_003,
    lease=4,
    max_retries=5,
    timeout_ms=6_000,
    expires_at_ms=1_765_000_000_004,
    errors=8,
    lost=9,
    unique_key="u-1",
    started_at_ms=1_765_000_000_005,
    headers={"trace": "t-1"},
    wants_result=True,
    result=b'"done"',
    limit_key="l-1",
    unique_in_queue=True,
    damage="a damaged record",
    result_problem="too big",
    workflow_id=12,
    batch_id=13,
    input=b'["step one"]',
    has_input=True,
    folded=True,
    fair_key="tenant-1",
)


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def test_every_field_of_the_message_lands_in_its_own_attribute() -> None:
    stream = object()
    job = Job.from_pb(EVERY_FIELD, stream)  # type: ignore[arg-type]
    assert job == Job(
        id=11,
        type="mail.send",
        queue="mail",
        priority=7,
        payload={"to": "a@example.com"},
        content_type=codec.JSON,
        status="in_flight",
        attempts=3,
        created_at=at(1_765_000_000_001),
        updated_at=at(1_765_000_000_002),
        run_at=at(1_765_000_000_003),
        lease=4,
        max_retries=5,
        timeout_ms=6_000,
        expires_at=at(1_765_000_000_004),
        errors=8,
        lost=9,
        started_at=at(1_765_000_000_005),
        unique_key="u-1",
        unique_in_queue=True,
        headers={"trace": "t-1"},
        wants_result=True,
        limit_key="l-1",
        fair_key="tenant-1",
        damage="a damaged record",
        result_problem="too big",
        workflow_id=12,
        batch_id=13,
        input=["step one"],
        has_input=True,
        folded=True,
    )
    # Left out of equality: the result, the stream and the client.
    assert job._result == b'"done"' and job._stream is stream and job._client is None


def test_every_field_of_the_message_is_read() -> None:
    """A field added to the message and not to from_pb leaves its attribute at the default."""
    job = Job.from_pb(EVERY_FIELD)
    never_from_the_message = {"duplicate", "payload_error", "_client", "_stream"}
    for spec in fields(Job):
        if spec.name in never_from_the_message:
            continue
        default = spec.default_factory() if callable(spec.default_factory) else spec.default
        assert getattr(job, spec.name) != default, f"{spec.name} kept its default"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"name":"é"}'.encode(), {"name": "é"}),
        ('{"name":"é"}'.encode("utf-16"), {"name": "é"}),  # JSON's other encodings still decode
    ],
)
def test_a_json_payload_decodes_from_any_of_its_encodings(raw: bytes, expected: object) -> None:
    assert Job.from_pb(pb.Job(id=1, payload=raw, content_type=codec.JSON)).payload == expected


def test_a_payload_that_is_not_json_is_kept_raw_with_the_reason() -> None:
    job = Job.from_pb(pb.Job(id=1, payload=b"\xff{not json", content_type=codec.JSON))
    assert job.payload == b"\xff{not json"
    assert job.payload_error.startswith("the payload does not decode as application/json")
    assert Job.from_pb(pb.Job(id=2, payload=b"[1]", content_type=codec.JSON)).payload_error == ""
