"""Every enqueue option, written once (`JobOptions`), and its one conversion to the wire
(`new_job_message`). Both clients' `enqueue` take them as typed keywords, `enqueue_many` and the
HTTP API as the keys of a job's mapping (`JOB_FIELDS`), `App` builds them from its job options.
A new option is a key here, a field in the proto, and the engine's path: nothing else.
"""

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Required, TypedDict

from pyqueue import defaults
from pyqueue.client import codec
from pyqueue.client.steering import SCOPES
from pyqueue.v1 import queue_pb2 as pb


class JobOptions(TypedDict, total=False):
    """The options of one job, each optional.

    - `queue` (default "default") and `priority` (0 runs first, 65535 last; default 32768).
    - `run_at` (a datetime) or `delay` (seconds or a timedelta) schedule it.
    - `max_retries`, `backoff` ((base_s, exponent, jitter_s)) and `timeout` (seconds per attempt)
      override the server's defaults.
    - `keep_completed` (seconds) keeps it visible after it completes.
    - With `unique_key`, a second job with the key is not added while the first is within
      `unique_scope` ("queued": scheduled or ready; "active": also in flight; "exists": until it
      is purged): the existing job comes back, with `duplicate=True`. With `unique_in_queue`, the
      key holds within `queue` only.
    - `headers` (str to str) go to the worker with the job (`job.headers`); the current trace
      context joins them when opentelemetry is installed.
    - With `keep_result` (seconds), the handler's return value is kept with the completed job that
      long: `job.result(timeout=...)` waits for it.
    - With `limit_key` (a customer id, say), the queue's per-key cap
      (`set_queue_limit(key_max_running=...)`) counts the job under that key.
    - With `fair_key` (a tenant, say), the job waits for its key's turn within its priority: the
      queue serves its keys in turn, in proportion to their weights (`set_fair_weight`).
    - With `fold_key`, a JSON payload joins the waiting job of its queue with that key (keeping its
      place; `duplicate=True` says so), until it holds `fold_max` payloads (default 1000): the
      job's payload is the list of them (docs/workflows.md, folding).
    - With `completed_result` (any JSON value), nothing runs: the job is recorded as completed
      elsewhere with that return value, kept `keep_result` seconds (how Celery's result backend
      keeps its outcomes: docs/celery.md); `job_by_key` finds the latest record by its unique key.
    """

    queue: str
    priority: int
    run_at: datetime | None
    delay: float | timedelta | None
    max_retries: int | None
    timeout: float | timedelta | None
    backoff: tuple[float, float, float] | None
    keep_completed: float | timedelta | None
    unique_key: str | None
    unique_scope: str
    unique_in_queue: bool
    headers: Mapping[str, str] | None
    keep_result: float | timedelta | None
    limit_key: str | None
    fair_key: str | None
    fold_key: str | None
    fold_max: int | None
    completed_result: Any


class JobSpec(JobOptions, total=False):
    """One job for `enqueue_many`: its type, its payload, and its options."""

    type: Required[str]
    payload: Any


JOB_FIELDS = frozenset(JobSpec.__annotations__)


def _ms(value: datetime | None) -> int:
    return int(value.timestamp() * 1000) if value is not None else 0


def _seconds_ms(value: float | timedelta | None) -> int:
    if value is None:
        return 0
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    return int(seconds * 1000)


def _check_fields(spec: Mapping[str, Any]) -> None:
    unknown = set(spec) - JOB_FIELDS
    if unknown:
        raise TypeError(f"unknown job fields: {', '.join(sorted(unknown))}")
    for name in ("type", "queue"):  # protobuf's own message for these is "bad argument type"
        value = spec.get(name, "")
        if not isinstance(value, str):
            raise TypeError(f"a job's {name} is a str, not {type(value).__name__}: {value!r:.80}")


def new_job_message(spec: Mapping[str, Any], context: Mapping[str, str] | None = None) -> pb.NewJob:
    """A NewJob from a mapping with `type`, optionally `payload`, and the keys of JobOptions;
    `context` (trace headers) goes under the job's own headers."""
    _check_fields(spec)
    raw, content_type = codec.encode(spec.get("payload"))
    message = pb.NewJob(
        type=spec["type"],
        queue=spec.get("queue", "default"),
        priority=spec.get("priority", defaults.PRIORITY),
        payload=raw,
        content_type=content_type,
        run_at_ms=_ms(spec.get("run_at")),
        delay_ms=_seconds_ms(spec.get("delay")),
        timeout_ms=_seconds_ms(spec.get("timeout")),
    )
    if spec.get("max_retries") is not None:
        message.max_retries = spec["max_retries"]
    if spec.get("backoff") is not None:
        base_s, exponent, jitter_s = spec["backoff"]
        message.backoff.CopyFrom(pb.Backoff(base_s=base_s, exponent=exponent, jitter_s=jitter_s))
    if spec.get("keep_completed") is not None:
        message.keep_completed_ms = _seconds_ms(spec["keep_completed"])
    if spec.get("keep_result") is not None:
        message.keep_result_ms = _seconds_ms(spec["keep_result"])
    if spec.get("limit_key"):
        message.limit_key = spec["limit_key"]
    if spec.get("fair_key"):
        message.fair_key = spec["fair_key"]
    if spec.get("fold_key"):
        message.fold_key = spec["fold_key"]
        message.fold_max = spec.get("fold_max") or 0
    if "completed_result" in spec:
        message.completed_result = json.dumps(spec["completed_result"], separators=(",", ":")).encode()
    if spec.get("unique_key"):
        scope = spec.get("unique_scope", "queued")
        if scope not in SCOPES:
            raise ValueError(f"unique_scope {scope!r} is not one of {', '.join(SCOPES)}")
        message.unique_key = spec["unique_key"]
        message.unique_scope = SCOPES[scope]
        message.unique_in_queue = bool(spec.get("unique_in_queue"))
    if context:  # the caller's trace context (tracing.context_headers), then the job's own headers
        message.headers.update(context)
    if spec.get("headers"):
        message.headers.update(spec["headers"])
    return message


def cron_message(entry: Mapping[str, Any]) -> pb.CronEntry:
    """A CronEntry from a mapping with `name`, `schedule`, `job` (a job spec, as for enqueue_many)
    and optionally `timezone` (IANA; default UTC)."""
    unknown = set(entry) - {"name", "schedule", "timezone", "job"}
    if unknown:
        raise TypeError(f"unknown periodic job fields: {', '.join(sorted(unknown))}")
    return pb.CronEntry(
        name=entry["name"],
        schedule=entry["schedule"],
        timezone=entry.get("timezone") or "UTC",
        job=new_job_message(entry["job"]),
    )
