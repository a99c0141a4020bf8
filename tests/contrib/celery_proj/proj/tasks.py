import os
import time
from pathlib import Path

from .celery import app

MARKS = Path(os.environ.get("PROJ_MARKS", "/tmp/proj-marks"))


def mark(name: str) -> None:
    """A line per run in the marks directory: what the tests count (a run that happened)."""
    MARKS.mkdir(parents=True, exist_ok=True)
    with open(MARKS / name, "a") as f:
        f.write(f"{os.getpid()}\n")


@app.task
def add(x, y):
    return x + y


@app.task
def mul(x, y):
    return x * y


@app.task
def xsum(numbers):
    return sum(numbers)


@app.task
def tick():
    mark("tick")


@app.task(bind=True, max_retries=3)
def flaky(self, key, fail_times):
    mark(key)
    runs = len((MARKS / key).read_text().splitlines())
    if runs <= fail_times:
        raise self.retry(countdown=0.2)
    return runs


@app.task(acks_late=True)
def slow(key, seconds):
    mark(key + ".started")
    time.sleep(seconds)
    mark(key + ".done")
    return key


@app.task
def boom():
    raise ValueError("boom")
