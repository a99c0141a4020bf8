"""Sentry for pyqueue jobs (`pip install "pyqueue[sentry]"`):

    import sentry_sdk
    from pyqueue.contrib.sentry import PyqueueIntegration

    sentry_sdk.init(dsn=..., traces_sample_rate=1.0, integrations=[PyqueueIntegration()])

In `pyqueue worker`, each run of a job is a Sentry transaction (op `queue.process`) named by the
job's type, with its id, queue, attempt and worker as tags, in a scope of its own (breadcrumbs
and tags of one job never leak into the next). The trace continues from the code that enqueued
the job: an enqueue made with the integration on carries `sentry-trace` and `sentry-baggage` in
the job's headers, as it carries OpenTelemetry's context.

An exception is reported `report="dies"` (the default): once, when the failure made the job dead
(out of retries, or killed), as the server answers; or `report="every_attempt"`: on every failed
attempt. A time limit counts as a failure; a `Retry` the handler asked for and a cancellation
do not. Call `sentry_sdk.init` in the module `pyqueue worker` loads (or in the worker's
process otherwise), and in the web process that enqueues, for the trace to continue.
"""

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.tracing import TransactionSource
from sentry_sdk.utils import event_from_exception

from pyqueue import observers

REPORTS = ("dies", "every_attempt")
FAILURES = ("error", "timeout", "kill")  # outcome kinds that are the job's failures
_STATUS = {"ok": "ok", "timeout": "deadline_exceeded", "cancelled": "cancelled", "retry": "aborted"}


class PyqueueIntegration(Integration):
    identifier = "pyqueue"
    origin = f"auto.queue.{identifier}"

    def __init__(self, report: str = "dies") -> None:
        if report not in REPORTS:
            raise ValueError(f"report={report!r}: one of {', '.join(REPORTS)}")
        self.report = report

    @staticmethod
    def setup_once() -> None:
        observers.register(_OBSERVER)


def _integration() -> PyqueueIntegration | None:
    return sentry_sdk.get_client().get_integration(PyqueueIntegration)


class _Observer:
    def enqueue_headers(self) -> dict[str, str] | None:
        if _integration() is None:
            return None
        headers = {"sentry-trace": sentry_sdk.get_traceparent(), "sentry-baggage": sentry_sdk.get_baggage()}
        return {name: value for name, value in headers.items() if value} or None

    @contextmanager
    def watch(self, job: Any) -> Iterator["_Run"]:
        integration = _integration()
        if integration is None:
            yield _Run(None, None)
            return
        with sentry_sdk.isolation_scope() as scope:
            scope.clear_breadcrumbs()
            tags = {
                "pyqueue.job_id": str(job.id),
                "pyqueue.queue": job.queue,
                "pyqueue.attempt": str(job.attempts),
                "pyqueue.worker": _WORKER,
            }
            for name, value in tags.items():
                scope.set_tag(name, value)
            scope.set_context("pyqueue job", {"id": str(job.id), "type": job.type, "queue": job.queue})
            carried = {
                "sentry-trace": job.headers.get("sentry-trace"),
                "baggage": job.headers.get("sentry-baggage"),
            }
            transaction = sentry_sdk.continue_trace(
                {k: v for k, v in carried.items() if v},
                op="queue.process",
                name=job.type,
                source=TransactionSource.TASK,
                origin=PyqueueIntegration.origin,
            )
            with sentry_sdk.start_transaction(transaction):
                yield _Run(integration, transaction)


class _Run:
    def __init__(self, integration: PyqueueIntegration | None, transaction: Any) -> None:
        self.integration = integration
        self.transaction = transaction

    def finished(self, outcome: Any, status: str | None) -> None:
        if self.integration is None:
            return
        self.transaction.set_status(_STATUS.get(outcome.kind, "internal_error"))
        if status is not None:
            self.transaction.set_tag("pyqueue.status", status)
        if outcome.kind not in FAILURES:
            return
        if self.integration.report == "every_attempt" or status == "dead" or outcome.kind == "kill":
            error = outcome.error or RuntimeError(f"{outcome.error_type}: {outcome.message}")
            event, hint = event_from_exception(
                error,
                client_options=sentry_sdk.get_client().options,
                mechanism={"type": PyqueueIntegration.identifier, "handled": False},
            )
            sentry_sdk.capture_event(event, hint=hint)


_WORKER = f"{socket.gethostname()}:{os.getpid()}"
_OBSERVER = _Observer()
