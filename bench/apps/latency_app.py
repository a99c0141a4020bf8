"""Job functions that stamp when they start, for the enqueue-to-start benchmark.

Each job carries the time it was enqueued; its handler appends (enqueued, started) to the file
named by PYQUEUE_BENCH_STAMPS, with one write (atomic for 16 bytes with O_APPEND). `app` has the
`def` handler and `async_app` the `async def` one, each alone, as an app of either kind would.
"""

import os
import struct
import time

import pyqueue

STAMP = struct.Struct("<dd")
app = pyqueue.App()
async_app = pyqueue.App()
_fd = -1


def _stamp(enqueued: float) -> None:
    global _fd
    started = time.time()
    if _fd < 0:
        _fd = os.open(os.environ["PYQUEUE_BENCH_STAMPS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, STAMP.pack(enqueued, started))


@app.job(queue="latency")
def stamp(enqueued: float) -> None:
    _stamp(enqueued)


@async_app.job(queue="latency")
async def astamp(enqueued: float) -> None:
    _stamp(enqueued)
