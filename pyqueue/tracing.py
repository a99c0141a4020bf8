"""Trace context across the queue, when OpenTelemetry is installed (`pip install "pyqueue[otel]"`).

An enqueue puts the caller's context (W3C `traceparent`, `tracestate`) into the job's headers. The
worker runs the handler in a consumer span that continues that trace and links to the producer's
span, so a trace shows the request that enqueued a job and the job's run together, however long
the job waited. Without opentelemetry both steps do nothing.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyqueue import observers

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    ENABLED = True
except ImportError:  # the optional extra is not installed
    ENABLED = False


def context_headers() -> dict[str, str] | None:
    """The current trace context as job headers (OpenTelemetry's, and those of a registered
    observer such as Sentry's); None when there is none. Taken once per enqueue call, for all its
    jobs: the jobs of one call share the caller's span."""
    observed = observers.enqueue_headers()
    if not ENABLED or not trace.get_current_span().get_span_context().is_valid:
        return observed
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return {**headers, **observed} if observed else headers


SDK_CHECK_EVERY_S = 1.0
"""How long "no SDK is set up" is believed before it is asked again: asking reads the environment
(opentelemetry's `get_tracer_provider`), about 4% of a no-op job's worker time. A tracer provider
set while the worker runs is used from the next check on."""

clock = time.monotonic  # tests move it on
_no_sdk_until = 0.0


def wanted(job: Any) -> bool:
    """Whether a handler of this job runs in a span: there is a trace to continue, or an SDK to
    record a new one. Without either, a span would be a no-op that costs a no-op job's worker about
    a tenth of its time."""
    global _no_sdk_until
    if not ENABLED:
        return False
    if job.headers:
        return True
    now = clock()
    if now < _no_sdk_until:
        return False
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        _no_sdk_until = now + SDK_CHECK_EVERY_S
        return False
    return True


@contextmanager
def handling(job: Any) -> Iterator[Any]:
    """The span a handler runs in: a child of the producer's context, linked to its span. Yields
    the span (None when the job is not `wanted`) so the caller can mark a failed attempt."""
    if not wanted(job):
        yield None
        return
    parent = propagate.extract(dict(job.headers))
    producer = trace.get_current_span(parent).get_span_context()
    tracer = trace.get_tracer("pyqueue")
    with tracer.start_as_current_span(
        f"{job.queue} process",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=[Link(producer)] if producer.is_valid else [],
        attributes={
            "messaging.system": "pyqueue",
            "messaging.operation.type": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "pyqueue.job.type": job.type,
            "pyqueue.job.attempt": job.attempts,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def failed(span: Any, kind: str, message: str) -> None:
    """Mark the handler's span as failed (an error, a time limit, a retry or a kill asked for)."""
    if span is not None:
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {message}"))
        span.set_attribute("pyqueue.outcome", kind)
