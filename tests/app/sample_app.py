"""The app the worker tests run (imported by `pyqueue worker tests.app.sample_app:app`)."""

import asyncio
import os
import time
from pathlib import Path

import pyqueue

app = pyqueue.App()
LOG = Path(os.environ.get("SAMPLE_LOG", "/tmp/pyqueue-sample.log"))


def record(line: str) -> None:
    with LOG.open("a") as f:
        f.write(line + "\n")


@app.job(queue="work")
def add(a: int, b: int) -> int:
    record(f"add {a + b}")
    return a + b


@app.job(queue="work")
async def greet(name: str) -> None:
    await asyncio.sleep(0.01)
    record(f"greet {name}")


@app.job(queue="work")
def explode(reason: str) -> None:
    raise ValueError(reason)


@app.job(queue="work")
def kill_me() -> None:
    raise pyqueue.Kill("not worth retrying")


@app.job(queue="work")
def again_soon() -> None:
    raise pyqueue.Retry(delay=3600, reason="come back in an hour")


@app.job(queue="work", timeout=1.5)
def within_limit(n: int, seconds: float) -> None:
    """Each run fits its limit; run one at a time, the last ones wait longer than the limit to
    start: the limit must count from the start, not from the delivery."""
    time.sleep(seconds)
    record(f"within {n}")


@app.job(queue="work", timeout=1, retries=0)
def sync_overrun(seconds: float) -> None:
    record("sync overrun started")
    time.sleep(seconds)
    record("sync overrun finished")  # the thread runs on, abandoned; its result is ignored


@app.job(queue="work", timeout=1, retries=0)
async def async_overrun(seconds: float) -> None:
    record("async overrun started")
    await asyncio.sleep(seconds)
    record("async overrun finished")  # never: the handler is cancelled at its limit


@app.job(queue="work")
def linger(seconds: float) -> None:
    record("linger started")
    time.sleep(seconds)
    record("linger done")


@app.job(queue="work")
def noop() -> None:
    pass


@app.job(queue="work")
async def anoop() -> None:
    pass


@app.job(queue="work")
def crash() -> None:
    """A poison job: it takes its worker process down."""
    record("crash")
    os.kill(os.getpid(), 9)


@app.job(queue="work", keep_result=600)
def multiply(a: int, b: int) -> dict[str, int]:
    return {"product": a * b}


@app.job(queue="work", keep_result=600, retries=0)
def unserialisable() -> object:
    return object()


@app.job(queue="work")
async def wait_forever() -> None:
    record("waiting")
    await asyncio.sleep(3600)


@app.job(queue="work")
def cooperative() -> None:
    record("cooperating")
    while not pyqueue.current_job().cancelled:
        time.sleep(0.02)
    record("noticed the cancel")


@app.job(queue="work")
def stubborn() -> None:
    """Never looks at current_job().cancelled: under --pool process a cancel kills its process."""
    record(f"stubborn pid {os.getpid()}")
    time.sleep(3600)
    record("stubborn finished")


@app.job(queue="work")
def whoami() -> None:
    record(f"current job {pyqueue.current_job().job.id} attempt {pyqueue.current_job().job.attempts}")


@app.job(queue="limited")
def overlap(seconds: float) -> None:
    started = time.time()
    time.sleep(seconds)
    record(f"ran {started} {time.time()}")


@app.job(queue="keyed", limit_key=lambda customer, seconds: customer)
def per_customer(customer: str, seconds: float) -> None:
    started = time.time()
    time.sleep(seconds)
    record(f"ran {customer} {started} {time.time()}")


@app.job(queue="rated")
def stamp() -> None:
    record(f"at {time.time()}")
