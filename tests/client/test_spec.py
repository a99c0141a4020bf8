"""The one job spec (client/spec.py): every option reaches the wire, and an unknown one is refused
by name, the same way for both clients, enqueue_many and the HTTP API (which share JOB_FIELDS)."""

from datetime import UTC, datetime

import pytest

from pyqueue.client.spec import JOB_FIELDS, JobOptions, new_job_message
from pyqueue.server import http_api_fields

SET: JobOptions = {
    "queue": "mail",
    "priority": 7,
    "run_at": datetime(2030, 1, 1, tzinfo=UTC),
    "delay": 5,
    "max_retries": 3,
    "timeout": 9,
    "backoff": (1.0, 2.0, 0.5),
    "keep_completed": 60,
    "unique_key": "k",
    "unique_scope": "active",
    "unique_in_queue": True,
    "headers": {"h": "v"},
    "keep_result": 30,
    "limit_key": "customer-1",
    "fair_key": "tenant-1",
    "fold_key": "digest",
    "fold_max": 10,
    "completed_result": {"ok": True},
}


def test_every_option_changes_the_message_and_the_lists_agree() -> None:
    assert set(SET) == set(JobOptions.__annotations__), "SET names every option once"
    assert {"type", "payload", *SET} == JOB_FIELDS
    assert http_api_fields.FIELDS == JOB_FIELDS
    assert set(http_api_fields._FIELD_TYPES) == JOB_FIELDS - {"payload"}, (
        "the HTTP API checks each one's type"
    )
    for option, value in SET.items():
        # unique_scope and unique_in_queue mean something only beside a unique key
        base = (
            {"type": "t", "unique_key": "k"}
            if option.startswith("unique_") and option != "unique_key"
            else {"type": "t", "fold_key": "f"}
            if option == "fold_max"
            else {"type": "t"}
        )
        assert new_job_message({**base, option: value}) != new_job_message(base), f"{option} is lost"


def test_an_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="unknown job fields: colour"):
        new_job_message({"type": "t", "colour": "red"})


def test_a_type_or_queue_that_is_not_a_str_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="a job's type is a str, not dict"):
        new_job_message({"type": {"type": "t"}})
    with pytest.raises(TypeError, match="a job's queue is a str, not int"):
        new_job_message({"type": "t", "queue": 7})
