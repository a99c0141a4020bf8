"""What an outbox row holds, apart from any database library: the SQLAlchemy outbox
(contrib/outbox.py) and Django's (contrib/django/outbox.py) write rows of this shape into the same
table, and the one relay (contrib/relay.py) reads them back.

A row is (id, created_at, spec, refused): the job's spec as JSON, the epoch seconds it was written
at, and the server's reason if it refused the job for good. Its id makes the job's unique key."""

import base64
import json
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pyqueue.app import BoundJob, JobFunction
from pyqueue.client.spec import JOB_FIELDS

TABLE = "pyqueue_outbox"


def row_key(table: str, row_id: int) -> str:
    """The unique key of the job a row becomes (scope `exists`), unless its spec has its own."""
    return f"outbox:{table}:{row_id}"


def row_values(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The row for `spec`, checked now (a bad spec fails the app's call, not the relay)."""
    unknown = set(spec) - JOB_FIELDS
    if unknown or "type" not in spec:
        raise TypeError(f"a job spec needs 'type' and only job fields (unknown: {sorted(unknown)})")
    return {"created_at": time.time(), "spec": json.dumps(_plain(spec), separators=(",", ":"))}


def job_spec(
    job: JobFunction[Any, Any] | BoundJob[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The spec of a call of an @app.job function (or of one with .options()), checked against
    its signature."""
    bound = job if isinstance(job, BoundJob) else BoundJob(job, job.defaults)
    function = bound.function
    function.enqueuing()
    return bound.opts.spec(function.name, function.payload(*args, **kwargs))


def _plain(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as JSON holds it: run_at as epoch seconds, durations as seconds, a bytes payload
    as base64 (under its own name, so that no JSON payload is mistaken for one)."""
    plain: dict[str, Any] = {}
    for name, value in spec.items():
        if value is None:
            continue
        if name == "run_at" and isinstance(value, datetime):
            value = value.timestamp()
        elif isinstance(value, timedelta):
            value = value.total_seconds()
        elif name == "payload" and isinstance(value, bytes | bytearray | memoryview):
            name, value = "payload_base64", base64.b64encode(bytes(value)).decode()
        plain[name] = value
    return plain


def from_row(spec: str, created_at: float) -> dict[str, Any]:
    """A row's spec as Client.enqueue_many takes it; a delay counts from when the row was
    written, not from when the relay sends it."""
    found: dict[str, Any] = json.loads(spec)
    if "payload_base64" in found:
        found["payload"] = base64.b64decode(found.pop("payload_base64"))
    if found.get("run_at") is not None:
        found["run_at"] = datetime.fromtimestamp(float(found["run_at"])).astimezone()
    if found.get("delay"):
        found["run_at"] = datetime.fromtimestamp(created_at + float(found.pop("delay"))).astimezone()
    return found
