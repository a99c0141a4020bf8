"""Jobs over HTTP/JSON, for what has no gRPC (curl, a webhook sender, a serverless function):

- `POST /v1/jobs` with one job (a JSON object) or many (a JSON array): answered once committed,
  like the gRPC Enqueue (it is one, through the server's own address), all or nothing per shard;
- `GET /v1/jobs/{id}`: the job as JSON.

A job is {"type": ..., "payload": <any JSON>, "queue", "priority", "delay" (seconds), "run_at"
(ISO 8601), "max_retries", "timeout" (seconds), "backoff", "keep_completed", "keep_result" (seconds),
"unique_key", "unique_scope", "unique_in_queue", "limit_key", "headers"}; only "type" is needed. A
Python job function's payload is {"args": [...], "kwargs": {...}}. Ids are strings (they pass
2**53). With tokens on, send `Authorization: Bearer TOKEN`; the gRPC server checks its rights.
"""

import json
import math
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pyqueue.client.spec import JOB_FIELDS
from pyqueue.engine.errors import InvalidArgument, ResourceExhausted
from pyqueue.errors import PyQueueError
from pyqueue.errors import ResourceExhausted as PyQueueResourceExhausted
from pyqueue.server.http_answers import StartResponse, error_answer, json_answer
from pyqueue.server.http_clients import TokenClients
from pyqueue.server.http_limits import HttpLimits, body_chunks, parse_jobs

_JOB = re.compile(r"^/v1/jobs/([0-9]+)$")
FIELDS = JOB_FIELDS  # what a job spec takes, as the Python client's enqueue_many
_STATUS = {  # gRPC status name -> HTTP status
    "INVALID_ARGUMENT": "400 Bad Request",
    "NOT_FOUND": "404 Not Found",
    "FAILED_PRECONDITION": "409 Conflict",
    "RESOURCE_EXHAUSTED": "413 Content Too Large",
    "UNAUTHENTICATED": "401 Unauthorized",
    "PERMISSION_DENIED": "403 Forbidden",
    "UNAVAILABLE": "503 Service Unavailable",
}


class BadRequest(Exception):
    pass


class UnsupportedType(Exception):
    """Not JSON: a form's or text/plain, what another site's page may POST without asking."""


class JobsApi:
    def __init__(self, clients: TokenClients, limits: HttpLimits) -> None:
        self._clients = clients
        self.limits = limits

    def app(
        self, environ: dict[str, Any], start_response: StartResponse, authorization: str | None
    ) -> Iterable[bytes]:
        self._clients.serve(authorization)
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
        try:
            if path == "/v1/jobs":
                if method != "POST":
                    return error_answer(
                        start_response, "405 Method Not Allowed", "POST a job or a list", "UNIMPLEMENTED"
                    )
                return json_answer(start_response, "200 OK", self._enqueue(environ))
            match = _JOB.match(path)
            if match and method in ("GET", "HEAD"):
                if len(match.group(1)) > 20 or int(match.group(1)) >= 1 << 64:
                    raise BadRequest(f"job id {match.group(1)[:30]} is out of range: ids are below 2^64")
                job = self._clients.client.get_job(int(match.group(1)))
                return json_answer(start_response, "200 OK", job.to_dict())
            return error_answer(
                start_response, "404 Not Found", "try POST /v1/jobs or GET /v1/jobs/ID", "NOT_FOUND"
            )
        except UnsupportedType as exc:
            return error_answer(start_response, "415 Unsupported Media Type", str(exc), "INVALID_ARGUMENT")
        except BadRequest as exc:
            return error_answer(start_response, "400 Bad Request", str(exc), "INVALID_ARGUMENT")
        except PyQueueError as exc:
            status = _STATUS.get(exc.code.name, "502 Bad Gateway")
            return error_answer(start_response, status, str(exc), exc.code.name)

    def _enqueue(self, environ: dict[str, Any]) -> Any:
        kind = str(environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise UnsupportedType(
                f"the body must be JSON, sent with Content-Type: application/json (it was {kind or 'not given'!r})"
            )
        try:
            chunks = body_chunks(environ["wsgi.input"], environ.get("CONTENT_LENGTH"), self.limits)
            body = parse_jobs(chunks, self.limits.max_jobs)
        except InvalidArgument as exc:  # a bad or lying Content-Length, a body that trickles
            time.sleep(self.limits.refusal_pause_s)
            raise BadRequest(str(exc)) from None
        except ResourceExhausted as exc:  # too big, or too many jobs (the rest is never read)
            time.sleep(self.limits.refusal_pause_s)
            raise PyQueueResourceExhausted(str(exc)) from None
        except RecursionError:
            raise BadRequest("the body is JSON nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(f"the body is not JSON ({exc})") from None
        many = isinstance(body, list)
        specs = [_spec(i, job) for i, job in enumerate(body if many else [body])]
        if not specs:
            raise BadRequest("the list holds no jobs")
        try:
            jobs = self._clients.client.enqueue_many(specs)
        except (TypeError, ValueError) as exc:
            raise BadRequest(str(exc)) from None
        answers = [{"id": str(j.id), "duplicate": j.duplicate, "status": j.status} for j in jobs]
        return {"jobs": answers} if many else answers[0]


def _spec(index: int, job: Any) -> dict[str, Any]:
    if not isinstance(job, dict) or not isinstance(job.get("type"), str):
        raise BadRequest(f'job {index}: a job is a JSON object with a string "type"')
    unknown = set(job) - FIELDS
    if unknown:
        raise BadRequest(
            f"job {index}: unknown fields {', '.join(sorted(unknown))}; known: {', '.join(sorted(FIELDS))}"
        )
    for name, value in job.items():
        expected = _FIELD_TYPES.get(name)
        if expected is not None and value is not None and not expected[0](value):
            raise BadRequest(f"job {index}: {name} must be {expected[1]} (it is {_shown(value)})")
    spec = dict(job)
    if isinstance(spec.get("run_at"), str):
        try:
            spec["run_at"] = datetime.fromisoformat(spec["run_at"])
        except ValueError:
            raise BadRequest(f"job {index}: run_at {spec['run_at'][:40]!r} is not an ISO 8601 time") from None
    return spec


_BIGGEST = 1 << 53  # past it a JSON number loses digits (and seconds become ms past int64)


def _number(value: Any) -> bool:
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
    "delay": (_number, "a finite number of seconds"),
    "run_at": (_text, 'an ISO 8601 time in a string ("2030-01-01T09:00:00+00:00")'),
    "max_retries": (_integer, "a whole number"),
    "timeout": (_number, "a finite number of seconds"),
    "backoff": (
        lambda v: isinstance(v, list) and len(v) == 3 and all(map(_number, v)),
        "[base_s, exponent, jitter_s]",
    ),
    "keep_completed": (_number, "a finite number of seconds"),
    "keep_result": (_number, "a finite number of seconds"),
    "unique_key": (_text, "a string"),
    "unique_scope": (_text, "a string"),
    "unique_in_queue": (lambda v: isinstance(v, bool), "true or false"),
    "limit_key": (_text, "a string"),
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
