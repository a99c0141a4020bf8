"""No-op job functions for the worker benchmarks: `app` has the `def` one, `async_app` the
`async def` one, each alone, so that `pyqueue worker` gives each its own default concurrency."""

import pyqueue

app = pyqueue.App()
async_app = pyqueue.App()


@app.job(queue="bench")
def noop() -> None:
    pass


@async_app.job(queue="bench")
async def anoop() -> None:
    pass


def target(kind: str) -> str:
    """The MODULE:APP that `pyqueue worker` runs for jobs of `kind` (noop or anoop)."""
    return "noop_app:async_app" if kind == "anoop" else "noop_app:app"
