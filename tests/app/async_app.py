"""An app whose job functions are all `async def`: `pyqueue worker` gives it the async default
concurrency. `together(n)` finishes only once n of its jobs run at the same time, so a worker that
runs fewer at once never finishes them."""

import asyncio
import os
from pathlib import Path

import pyqueue

app = pyqueue.App()
LOG = Path(os.environ.get("SAMPLE_LOG", "/tmp/pyqueue-async-sample.log"))
_running = 0
_all_in: asyncio.Event | None = None


@app.job(queue="together")
async def together(n: int) -> None:
    global _running, _all_in
    if _all_in is None:
        _all_in = asyncio.Event()
    _running += 1
    if _running >= n:
        _all_in.set()
    await _all_in.wait()
    with LOG.open("a") as f:
        f.write(f"together {n}\n")
