"""Jobs over HTTP/JSON, for what has no gRPC (curl, a webhook sender, a serverless function):

- `POST /v1/jobs` with one job (a JSON object) or many (a JSON array): answered once committed,
  like the gRPC Enqueue (it is one, through the server's own address), all or nothing per shard;
- `GET /v1/jobs/{id}`: the job as JSON;
- `POST /v1/workflows` with a workflow (http_workflows.py), `POST /v1/workflows/{id}/cancel` or
  `/retry`, and `GET /v1/batches/{id}`: a batch's progress.

A job is {"type": ..., "payload": <any JSON>, "queue", "priority", "delay" (seconds), "run_at"
(ISO 8601), "max_retries", "timeout" (seconds), "backoff", "keep_completed", "keep_result" (seconds),
"unique_key", "unique_scope", "unique_in_queue", "limit_key", "fair_key", "headers"}; only "type" is needed. A
Python job function's payload is {"args": [...], "kwargs": {...}}. Ids are strings (they pass
2**53). With tokens on, send `Authorization: Bearer TOKEN`; the gRPC server checks its rights.
"""

import re
import time
from collections.abc import Iterable
from typing import Any

from pyqueue.engine.errors import InvalidArgument, ResourceExhausted
from pyqueue.errors import PyQueueError
from pyqueue.errors import ResourceExhausted as PyQueueResourceExhausted
from pyqueue.server.http_answers import StartResponse, error_answer, json_answer
from pyqueue.server.http_api_fields import BadRequest, job_spec, parse_id
from pyqueue.server.http_clients import TokenClients
from pyqueue.server.http_limits import HttpLimits, body_chunks, parse_jobs
from pyqueue.server.http_workflows import workflow_step

_JOB = re.compile(r"^/v1/jobs/([0-9]+)$")
_BATCH = re.compile(r"^/v1/batches/([0-9]+)$")
_WORKFLOW_CHANGE = re.compile(r"^/v1/workflows/([0-9]+)/(cancel|retry)$")
_PATHS = "POST /v1/jobs, GET /v1/jobs/ID, POST /v1/workflows, POST /v1/workflows/ID/cancel|retry, GET /v1/batches/ID"
_STATUS = {  # gRPC status name -> HTTP status
    "INVALID_ARGUMENT": "400 Bad Request",
    "NOT_FOUND": "404 Not Found",
    "FAILED_PRECONDITION": "409 Conflict",
    "RESOURCE_EXHAUSTED": "413 Content Too Large",
    "UNAUTHENTICATED": "401 Unauthorized",
    "PERMISSION_DENIED": "403 Forbidden",
    "UNAVAILABLE": "503 Service Unavailable",
}


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
            if path in ("/v1/jobs", "/v1/workflows") or _WORKFLOW_CHANGE.match(path):
                if method != "POST":
                    return error_answer(
                        start_response, "405 Method Not Allowed", f"POST to {path}", "UNIMPLEMENTED"
                    )
                return json_answer(start_response, "200 OK", self._post(path, environ))
            found = (_JOB.match(path) or _BATCH.match(path)) if method in ("GET", "HEAD") else None
            if found:
                client, is_job = self._clients.client, path.startswith("/v1/jobs/")
                item_id = parse_id(found.group(1), "job" if is_job else "batch")
                item = client.get_job(item_id) if is_job else client.batch(item_id)
                return json_answer(start_response, "200 OK", item.to_dict())
            return error_answer(start_response, "404 Not Found", f"no such path: try {_PATHS}", "NOT_FOUND")
        except UnsupportedType as exc:
            return error_answer(start_response, "415 Unsupported Media Type", str(exc), "INVALID_ARGUMENT")
        except BadRequest as exc:
            return error_answer(start_response, "400 Bad Request", str(exc), "INVALID_ARGUMENT")
        except PyQueueError as exc:
            status = _STATUS.get(exc.code.name, "502 Bad Gateway")
            return error_answer(start_response, status, str(exc), exc.code.name)

    def _post(self, path: str, environ: dict[str, Any]) -> Any:
        # Every change is a JSON POST, even one whose body says nothing: another site's page can
        # POST a form or text/plain without asking, never JSON.
        body = self._body(environ)
        client = self._clients.client
        if path == "/v1/jobs":
            return self._enqueue(body)
        if path == "/v1/workflows":
            try:
                run = client.enqueue_workflow(workflow_step(body, self.limits.max_workflow_jobs))
            except (TypeError, ValueError) as exc:
                raise BadRequest(str(exc)) from None
            return {
                "workflow_id": str(run.workflow_id),
                "batch_id": str(run.batch_id),
                "job_id": str(run.job_id),
            }
        match = _WORKFLOW_CHANGE.match(path)
        assert match is not None
        workflow_id, action = parse_id(match.group(1), "workflow"), match.group(2)
        change = client.cancel_workflow if action == "cancel" else client.retry_workflow
        return {"workflow_id": str(workflow_id), action: len(change(workflow_id).changed)}

    def _body(self, environ: dict[str, Any]) -> Any:
        """The request's JSON (a list of jobs is read one job at a time, and refused past
        --max-jobs-per-enqueue before the rest is read)."""
        kind = str(environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise UnsupportedType(
                f"the body must be JSON, sent with Content-Type: application/json (it was {kind or 'not given'!r})"
            )
        try:
            chunks = body_chunks(environ["wsgi.input"], environ.get("CONTENT_LENGTH"), self.limits)
            return parse_jobs(chunks, self.limits.max_jobs)
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

    def _enqueue(self, body: Any) -> Any:
        many = isinstance(body, list)
        specs = [job_spec(f"job {i}", job) for i, job in enumerate(body if many else [body])]
        if not specs:
            raise BadRequest("the list holds no jobs")
        try:
            jobs = self._clients.client.enqueue_many(specs)
        except (TypeError, ValueError) as exc:
            raise BadRequest(str(exc)) from None
        answers = [{"id": str(j.id), "duplicate": j.duplicate, "status": j.status} for j in jobs]
        return {"jobs": answers} if many else answers[0]
