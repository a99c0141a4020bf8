"""`pyqueue.current_job()`: the job a handler is running, and whether it was cancelled.

The worker (and `drain()`) set it around each handler, in the handler's context: an async
handler runs in it, and a sync one runs in a copy of it on its thread. A cancel (CancelJobs)
cancels an async handler's task; a sync handler cannot be stopped from outside, so it should look
at `current_job().cancelled` now and then and return early.
"""

import asyncio
import contextvars
from dataclasses import dataclass, field
from typing import Any

_CURRENT: contextvars.ContextVar["CurrentJob | None"] = contextvars.ContextVar(
    "pyqueue_current_job", default=None
)


@dataclass
class CurrentJob:
    job: Any  # pyqueue.Job
    cancelled: bool = False
    _task: "asyncio.Task[Any] | None" = field(default=None, repr=False)

    def cancel(self) -> None:
        """Called by the worker when the server says the job was cancelled."""
        self.cancelled = True
        if self._task is not None and not self._task.done():
            self._task.cancel()


def current_job() -> CurrentJob:
    """The job this handler runs (with `.cancelled`). Raises LookupError outside a handler."""
    current = _CURRENT.get()
    if current is None:
        raise LookupError("current_job() is only known inside a job handler run by a worker")
    return current
