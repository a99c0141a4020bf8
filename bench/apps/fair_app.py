"""Jobs for bench/fair_share.py: tenant A's bulk no-op, and tenant B's job that stamps when it
starts (with latency_app's stamp, to the file named by PYQUEUE_BENCH_STAMPS)."""

from latency_app import _stamp

import pyqueue

app = pyqueue.App()


@app.job(queue="fair")
def bulk(n: int) -> None:
    pass


@app.job(queue="fair")
def small(enqueued: float) -> None:
    _stamp(enqueued)
