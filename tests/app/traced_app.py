"""An app whose handlers write down the span they run in (for tests/app/test_tracing.py), with an
OpenTelemetry SDK tracer provider set up the way an application would."""

import json
import os
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import pyqueue

if not isinstance(trace.get_tracer_provider(), TracerProvider):
    trace.set_tracer_provider(TracerProvider())

app = pyqueue.App()
LOG = Path(os.environ.get("TRACE_LOG", "/tmp/pyqueue-trace.log"))


def record(handler: str) -> None:
    span = trace.get_current_span()
    context = span.get_span_context()
    line = {
        "handler": handler,
        "name": getattr(span, "name", ""),
        "trace_id": context.trace_id,
        "parent": span.parent.span_id if getattr(span, "parent", None) else None,  # type: ignore[attr-defined]
        "links": [link.context.span_id for link in getattr(span, "links", ())],
        "kind": str(getattr(span, "kind", "")),
    }
    with LOG.open("a") as f:
        f.write(json.dumps(line) + "\n")


@app.job(queue="traced")
def sync_handler() -> None:
    record("sync")


@app.job(queue="traced")
async def async_handler() -> None:
    record("async")
