"""A job over HTTP/JSON, as `POST /v1/jobs` and the jobs of a workflow take it: the fields the
Python client's enqueue_many takes, each of its JSON type (the server checks ranges after), and
the refusal that names what to fix."""

import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pyqueue.client.spec import JOB_FIELDS

FIELDS = JOB_FIELDS  # what a job spec takes, as the Python client's enqueue_many


class BadRequest(ValueError):
    """The request is not what the API takes: answered 400 with this message."""


def parse_id(text: str, what: str = "id") -> int:
    """A job's, batch's or workflow's id from a path: digits, below 2**64."""
    if not text.isdigit() or len(text) > 20 or int(text) >= 1 << 64:
        raise BadRequest(f"{what} {text[:30]} is not an id: ids are whole numbers below 2^64")
    return int(text)


def parse_limit(text: str | None, default: int, most: int) -> int:
    """A page's `limit` from a query string: a whole number in 1..most (past it, `most`)."""
    if text is None or text == "":
        return default
    if not text.isdigit() or int(text) < 1:
        raise BadRequest(f"limit {text[:30]!r} is not a whole number from 1 to {most}")
    return min(int(text), most)


def job_spec(where: str, job: Any) -> dict[str, Any]:
    """The client's job spec for a job's JSON; BadRequest names `where` ("job 3") and the field."""
    if not isinstance(job, dict) or not isinstance(job.get("type"), str):
        raise BadRequest(f'{where}: a job is a JSON object with a string "type"')
    unknown = set(job) - FIELDS
    if unknown:
        raise BadRequest(
            f"{where}: unknown fields {', '.join(sorted(unknown))}; known: {', '.join(sorted(FIELDS))}"
        )
    for name, value in job.items():
        expected = _FIELD_TYPES.get(name)
        if expected is not None and value is not None and not expected[0](value):
            raise BadRequest(f"{where}: {name} must be {expected[1]} (it is {_shown(value)})")
    spec = dict(job)
    if isinstance(spec.get("run_at"), str):
        try:
            spec["run_at"] = datetime.fromisoformat(spec["run_at"])
        except ValueError:
            raise BadRequest(f"{where}: run_at {spec['run_at'][:40]!r} is not an ISO 8601 time") from None
    return spec


_BIGGEST = 1 << 53  # past it a JSON number loses digits (and seconds become ms past int64)


def number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= _BIGGEST
    )


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _BIGGEST


def _text(value: Any) -> bool:
    return isinstance(value, str)


# The JSON type of each field a job spec takes over HTTP (the server checks ranges after).
_FIELD_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (_text, "a string"),
    "queue": (_text, "a string"),
    "priority": (_integer, "a whole number"),
    "delay": (number, "a finite number of seconds"),
    "run_at": (_text, 'an ISO 8601 time in a string ("2030-01-01T09:00:00+00:00")'),
    "max_retries": (_integer, "a whole number"),
    "timeout": (number, "a finite number of seconds"),
    "backoff": (
        lambda v: isinstance(v, list) and len(v) == 3 and all(map(number, v)),
        "[base_s, exponent, jitter_s]",
    ),
    "keep_completed": (number, "a finite number of seconds"),
    "keep_result": (number, "a finite number of seconds"),
    "unique_key": (_text, "a string"),
    "unique_scope": (_text, "a string"),
    "unique_in_queue": (lambda v: isinstance(v, bool), "true or false"),
    "completed_result": (lambda v: True, "any JSON value"),  # a record's result, as the payload is any
    "limit_key": (_text, "a string"),
    "fair_key": (_text, "a string"),
    "fold_key": (_text, "a string"),
    "fold_max": (_integer, "a whole number"),
    "headers": (
        lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
        ),
        "an object of strings",
    ),
}


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:40] + "..."
