"""A no-op Celery task that counts its runs in a file (bench/celery_broker.py), on whichever
broker CELERY_BROKER names: the same app on Redis and on pyqueue."""

import os

from celery import Celery

import pyqueue.contrib.celery  # noqa: F401  (a producer outside the `celery` command: docs/celery.md)

app = Celery("bench", broker=os.environ.get("CELERY_BROKER", "pyqueue://127.0.0.1:7411"))
app.conf.update(task_ignore_result=True, worker_prefetch_multiplier=4, task_default_queue="bench")
RUNS = os.environ.get("BENCH_RUNS_FILE", "/tmp/celery-broker-runs")


@app.task(name="noop")
def noop(n: int) -> None:
    fd = os.open(RUNS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"%08d\n" % n)  # one fixed-size line per run: the file's size counts them
    finally:
        os.close(fd)
