"""A worker app with Sentry on (the DSN from SENTRY_DSN, the report mode from SENTRY_REPORT),
and, run as a script, the web side: `python sentry_app.py ADDRESS` enqueues one job that works
and one that fails inside a Sentry transaction, and prints that transaction's trace id."""

import os
import sys

import sentry_sdk

import pyqueue
from pyqueue.contrib.sentry import PyqueueIntegration

sentry_sdk.init(
    dsn=os.environ["SENTRY_DSN"],
    traces_sample_rate=1.0,
    integrations=[PyqueueIntegration(report=os.environ.get("SENTRY_REPORT", "dies"))],
)
app = pyqueue.App()


@app.job(queue="sentry")
def works(n: int) -> int:
    sentry_sdk.add_breadcrumb(message=f"working on {n}")
    return n


@app.job(queue="sentry")
def fails(n: int) -> None:
    sentry_sdk.add_breadcrumb(message=f"failing on {n}")
    raise ValueError(f"boom {n}")


if __name__ == "__main__":
    with pyqueue.Client(sys.argv[1]) as client:
        with sentry_sdk.start_transaction(op="http.server", name="POST /orders") as request:
            client.enqueue("sentry_app.works", {"args": [1], "kwargs": {}}, queue="sentry")
            client.enqueue(
                "sentry_app.fails",
                {"args": [2], "kwargs": {}},
                queue="sentry",
                max_retries=1,
                backoff=(0.05, 1.0, 0.0),
            )
        print(request.trace_id)
    sentry_sdk.flush(timeout=10)
