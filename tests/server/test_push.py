"""A push encoded natively (pyqueue.server.convert.push_message, plain jobs) says exactly what the
protobuf path says (job_to_pb), for every status and field a plain job carries."""

import itertools

from pyqueue.engine.model import JobView
from pyqueue.engine.retry import JobOptions
from pyqueue.server.convert import job_to_pb, push_message
from pyqueue.store.records import JobRecord, Status
from pyqueue.v1 import queue_pb2 as pb


def view(i: int, **changes: object) -> JobView:
    fields: dict[str, object] = dict(
        id=(1 << 62) + i, status=Status.IN_FLIGHT, queue="mail", type="send", priority=32768,
        created_ms=1_764_650_000_000, updated_ms=1_764_650_000_123, attempts=2, lease=0xFFFFFFFF,
        timeout_ms=30_000, expires_ms=1_764_650_030_123, started_ms=1_764_650_000_120,
    )  # fmt: skip
    fields.update(changes)
    return JobView(JobRecord(**fields), b'{"args": [%d]}' % i)  # type: ignore[arg-type]


def by_protobuf(batch: list[JobView], held: pb.AckResult | None) -> pb.TakeResponse:
    message = pb.TakeResponse()
    for job in batch:
        job_to_pb(job, message.jobs.jobs.add)
    if held is not None:
        message.jobs.ack_result.CopyFrom(held)
    return message


VARIANTS: list[dict[str, object]] = [
    {},
    {"status": Status.READY, "attempts": 0, "lease": 0, "started_ms": 5},  # a start only in flight
    {"status": Status.SCHEDULED, "run_at_ms": 1_900_000_000_000},
    {"max_retries": -1, "errors": 3, "lost": 65_535, "priority": 0},
    {"queue": "ünïcode." * 10, "type": "t" * 128, "content_type": "application/json"},
    {"limit_key": "customer-42", "timeout_ms": 0, "expires_ms": 0},
]


def test_plain_jobs_go_native_and_say_what_protobuf_says() -> None:
    held = pb.AckResult(acked=[1, 2, 3], rejected=[pb.Rejection(id=4, code="NOT_FOUND", message="gone")])
    for answers in (None, held):
        batch = [view(i, **changes) for i, changes in enumerate(VARIANTS)]
        encoded = push_message(batch, answers)
        assert isinstance(encoded, bytes)
        assert pb.TakeResponse.FromString(encoded) == by_protobuf(batch, answers)


def test_an_empty_payload_and_every_pair_of_variants() -> None:
    for a, b in itertools.combinations(range(len(VARIANTS)), 2):
        batch = [view(a, **VARIANTS[a]), JobView(view(b, **VARIANTS[b]).record, b"")]
        encoded = push_message(batch, None)
        assert isinstance(encoded, bytes)
        assert pb.TakeResponse.FromString(encoded) == by_protobuf(batch, None)


def test_jobs_with_a_unique_key_or_options_take_the_protobuf_path() -> None:
    options = JobOptions(None, None, {"trace": "abc"}, 60_000).encode()
    for special in (view(1, unique_key="mail\x1forder-7"), view(2, options=options)):
        batch = [view(0), special]
        message = push_message(batch, None)
        assert isinstance(message, pb.TakeResponse)
        assert message == by_protobuf(batch, None)
    shown = push_message([view(2, options=options)], None)
    assert isinstance(shown, pb.TakeResponse)
    assert shown.jobs.jobs[0].headers["trace"] == "abc" and shown.jobs.jobs[0].wants_result
