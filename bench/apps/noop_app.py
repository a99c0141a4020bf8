"""No-op job functions for the worker benchmark."""

import pyqueue

app = pyqueue.App()


@app.job(queue="bench")
def noop() -> None:
    pass


@app.job(queue="bench")
async def anoop() -> None:
    pass
