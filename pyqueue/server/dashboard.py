"""The web dashboard: one static page (dashboard.html) and the JSON API it calls, on the HTTP port.

The API is a client of the server's own public address, like any other client, so a sharded
server is seen whole and nothing here reaches around the gRPC service. Job ids are strings in
JSON (they pass 2**53, where JavaScript numbers lose digits). Changes are POSTs that must carry
the `X-Pyqueue-Action` header, which a form on another site cannot send: a page elsewhere cannot
make a visitor's browser delete jobs.

With tokens on, each API call carries the visitor's token (the page asks for it once and keeps it
for the tab), and the dashboard's client passes it on: the gRPC server checks its rights.
"""

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote

from pyqueue.client import Client
from pyqueue.client.history import History, QueueHistory
from pyqueue.client.steering import FairKeys, per_process
from pyqueue.errors import InvalidArgument, NotFound, PermissionDenied, PyQueueError, Unauthenticated
from pyqueue.server.http_answers import StartResponse, answer, error_answer, json_answer
from pyqueue.server.http_api_fields import parse_id, parse_limit
from pyqueue.server.http_clients import TokenClients

log = logging.getLogger("pyqueue.http")
ACTION_HEADER = "HTTP_X_PYQUEUE_ACTION"
PAGE_LIMIT = 200

_JOB = re.compile(r"^/api/jobs/(\d+)$")
_JOB_ACTION = re.compile(r"^/api/jobs/(\d+)/(retry|delete)$")
_QUEUE_ACTION = re.compile(r"^/api/queues/([^/]+)/(pause|resume|retry-dead|delete-dead)$")
_KEYS = re.compile(r"^/api/queues/([^/]+)/keys$")
_WEIGHT = re.compile(r"^/api/queues/([^/]+)/weight$")
_WORKFLOW_ACTION = re.compile(r"^/api/workflows/(\d+)/(cancel|retry)$")


class Dashboard:
    def __init__(self, clients: TokenClients, cluster: Callable[[], dict[str, Any]] | None = None) -> None:
        self._clients = clients
        self._cluster = cluster

    @property
    def client(self) -> Client:
        return self._clients.client

    def app(
        self, environ: dict[str, Any], start_response: StartResponse, authorization: str | None = None
    ) -> Iterable[bytes]:
        """`authorization`: the caller's Authorization header (Bearer TOKEN), passed on."""
        self._clients.serve(authorization)
        path, method = environ.get("PATH_INFO", "/"), environ.get("REQUEST_METHOD", "GET")
        if path in ("/", "/index.html"):
            page = resources.files("pyqueue.server").joinpath("dashboard.html").read_bytes()
            return answer(start_response, "200 OK", page, "text/html; charset=utf-8")
        try:
            if method == "POST":
                if environ.get(ACTION_HEADER) != "1":
                    return error_answer(
                        start_response,
                        "403 Forbidden",
                        "changes need the X-Pyqueue-Action: 1 header",
                        "PERMISSION_DENIED",
                    )
                query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
                return json_answer(start_response, "200 OK", self._act(path, query))
            if method != "GET":
                return error_answer(start_response, "405 Method Not Allowed", "GET or POST", "UNIMPLEMENTED")
            return json_answer(
                start_response, "200 OK", self._read(path, parse_qs(environ.get("QUERY_STRING", "")))
            )
        except NotFound as exc:
            return error_answer(start_response, "404 Not Found", str(exc), "NOT_FOUND")
        except Unauthenticated as exc:
            return error_answer(start_response, "401 Unauthorized", str(exc), "UNAUTHENTICATED")
        except PermissionDenied as exc:
            return error_answer(start_response, "403 Forbidden", str(exc), "PERMISSION_DENIED")
        except (InvalidArgument, ValueError) as exc:
            return error_answer(start_response, "400 Bad Request", str(exc), "INVALID_ARGUMENT")
        except PyQueueError as exc:
            return error_answer(start_response, "502 Bad Gateway", f"{exc.code.name}: {exc}", exc.code.name)
        except Exception as exc:  # a bug here must answer, and must not take the HTTP thread down
            log.exception("the dashboard failed on %s %s", method, path)
            return error_answer(
                start_response, "500 Internal Server Error", f"{type(exc).__name__}: {exc}", "INTERNAL"
            )

    def _read(self, path: str, query: dict[str, list[str]]) -> Any:
        client = self.client
        if path == "/api/queues":
            return self._queues()
        if path == "/api/history":
            queue = (query.get("queue") or [""])[0]
            return _history(client.history(queue, total=not queue), queue)
        if path == "/api/cluster":
            if self._cluster is None:
                return None  # one machine
            client.workers()  # the same right as the workers page: the caller's token is checked
            return self._cluster()
        if path == "/api/batches":
            return [
                b.to_dict() for b in client.batches(parse_limit(query.get("limit", [""])[0], 50, PAGE_LIMIT))
            ]
        if path == "/api/workers":
            return [{**w.to_dict(), "queues": list(w.queues)} for w in per_process(client.workers())]
        if path == "/api/jobs":
            limit = parse_limit(query.get("limit", [""])[0], 50, PAGE_LIMIT)
            jobs, after, before = client.list_page(
                cursor=(query.get("cursor") or [""])[0],
                limit=limit,
                descending=(query.get("order") or ["asc"])[0] == "desc",
                queues=[q for q in query.get("queue", []) if q],
                types=[t for t in query.get("type", []) if t],
                statuses=[s for s in query.get("status", []) if s],
            )
            return {"jobs": [_job(j) for j in jobs], "next_cursor": after, "prev_cursor": before}
        match = _KEYS.match(path)
        if match:
            limit = parse_limit(query.get("limit", [""])[0], 20, PAGE_LIMIT)
            return _fair_keys(client.fair_keys(unquote(match.group(1)), limit))
        match = _JOB.match(path)
        if match:
            job_id = parse_id(match.group(1), "job")
            errors = [{**dataclasses.asdict(e), "at": e.at.isoformat()} for e in client.job_errors(job_id)]
            return {**_job(client.get_job(job_id)), "error_history": errors}
        raise NotFound(f"no such page: {path}")

    def _act(self, path: str, query: dict[str, list[str]]) -> Any:
        client = self.client
        match = _WEIGHT.match(path)
        if match:  # ?key=K&weight=N: a fair key's share ("" weighs the jobs without one)
            key, weight = query.get("key", []), query.get("weight", [])
            if len(key) != 1 or len(weight) != 1 or not weight[0].isdigit():
                raise InvalidArgument("give ?key=FAIR_KEY&weight=N (N from 1 to 10000)")
            return _fair_keys(client.set_fair_weight(unquote(match.group(1)), key[0], int(weight[0])))
        match = _JOB_ACTION.match(path)
        if match:
            job_id, action = parse_id(match.group(1), "job"), match.group(2)
            result = (client.retry_jobs if action == "retry" else client.delete_jobs)(ids=[job_id])
            if result.rejected:
                refusal = result.rejected[0]
                raise (NotFound if refusal.code == "NOT_FOUND" else InvalidArgument)(refusal.message)
            return {"done": action, "id": str(job_id)}
        match = _QUEUE_ACTION.match(path)
        if match:
            queue, action = unquote(match.group(1)), match.group(2)
            if action in ("retry-dead", "delete-dead"):  # every dead job of the queue, at once
                change = client.retry_jobs if action == "retry-dead" else client.delete_jobs
                result = change(queues=[queue], statuses=["dead"])
                return {"done": action, "queue": queue, "changed": len(result.changed)}
            info = client.pause(queue) if action == "pause" else client.resume(queue)
            return {"done": action, "queue": info.name, "paused": info.paused}
        match = _WORKFLOW_ACTION.match(path)
        if match:
            workflow_id, action = parse_id(match.group(1), "workflow"), match.group(2)
            if action == "cancel":
                result = client.cancel_workflow(workflow_id)
            else:
                result = client.retry_workflow(workflow_id)
            return {"done": action, "workflow_id": str(workflow_id), "changed": len(result.changed)}
        raise NotFound(f"no such action: {path}")

    def _queues(self) -> list[dict[str, Any]]:
        client = self.client
        workers: dict[str, int] = {}
        for w in per_process(client.workers()):
            for queue in w.queues:
                workers[queue] = workers.get(queue, 0) + 1
        return [
            {
                "name": q.name,
                "paused": q.paused,
                "limits": q.limits,
                "counts": q.counts,
                "workers": workers.get(q.name, 0),
                "enqueued_total": q.enqueued_total,
                "completed_total": q.completed_total,
                "oldest_ready_seconds": q.oldest_ready_seconds,
            }
            for q in client.queues()
        ]


def _fair_keys(keys: FairKeys) -> dict[str, Any]:
    return {
        "queue": keys.queue,
        "key_count": keys.key_count,
        "keys": [dataclasses.asdict(k) for k in keys.keys],
        "weights": keys.weights,
    }


def _history(history: History, queue: str) -> dict[str, Any]:
    """One queue's hour (every queue's, added up, when `queue` is empty) as the charts draw it:
    events per second and the wait's p50 and p99 per step, in seconds."""
    if queue and queue not in history.queues:
        series = QueueHistory([], [], [], [], [])  # nothing happened on it this hour
    else:
        series = history.queues[queue] if queue else history.total()
    steps = len(series.enqueued) or 360
    per_second = history.step_seconds or 1
    rate = {
        name: [n / per_second for n in getattr(series, name)] or [0.0] * steps
        for name in ("enqueued", "completed", "failed", "dead")
    }
    waits = {
        f"wait_p{round(p * 100)}": [_finite(v) for v in series.wait_percentile(p, history.wait_bounds)]
        or [None] * steps
        for p in (0.5, 0.99)
    }
    return {
        "step_seconds": history.step_seconds,
        "start": (history.last_step - steps + 1) * history.step_seconds,
        "queue": queue,
        "queues": sorted(q for q in history.names if q),  # "": past the cap, in the total only
        **rate,
        **waits,
    }


def _finite(value: float | None) -> float | None:
    """A wait past the last bound is drawn at that bound's double (JSON has no infinity)."""
    return None if value is None else value if value != float("inf") else 7200.0


def _job(job: Any) -> dict[str, Any]:
    out: dict[str, Any] = job.to_dict()  # the id is a string already
    if isinstance(job.payload, bytes):
        try:
            out["payload"] = job.payload.decode()
        except UnicodeDecodeError:
            out["payload"] = "hex:" + job.payload.hex()
    return out
