"""Running one job under its time limit, and what became of it: the rules `pyqueue worker` and
`drain()` share.

The limit is the job's `timeout_ms`, counted from the start (the server counts the same, and fails
the attempt itself a grace later if no answer came). Past it:
- an async handler is cancelled;
- a sync handler in a thread cannot be stopped by Python: the thread is abandoned (it runs on,
  its result is ignored) and the slot is freed; `AttemptOutcome.abandoned` says so;
- in a process pool the child is killed (see pool.py).
The outcome is then a failed attempt with a `TimeLimitExceeded` error, retried by the job's policy.
"""

import asyncio
import contextvars
import functools
import json
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pyqueue import tracing
from pyqueue.app import JobFunction, Kill, Retry
from pyqueue.client.job import Job
from pyqueue.context import _CURRENT, CurrentJob
from pyqueue.worker.threads import HandlerThreads


class TimeLimitExceeded(Exception):
    """The attempt ran past the job's timeout."""


class RemoteError(Exception):
    """A handler's exception from another process, carried back as text."""

    def __init__(self, message: str, error_type: str, backtrace: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.backtrace = backtrace


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    kind: str  # ok | retry | kill | error | timeout | cancelled
    message: str = ""
    error_type: str = ""
    backtrace: str = ""
    retry_at_ms: int = 0
    error: BaseException | None = None
    result: bytes | None = None  # ok, and the job keeps its result: the return value as JSON

    @property
    def failed(self) -> bool:
        return self.kind != "ok"


_OK = AttemptOutcome("ok")  # shared: most attempts end so, and a frozen AttemptOutcome costs 2 us to make


def arguments(payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """The Python payload envelope: {"args": [...], "kwargs": {...}}."""
    if not isinstance(payload, dict):
        return [], {}
    return list(payload.get("args", [])), dict(payload.get("kwargs", {}))


def given_payload(job: Job) -> Any:
    """A workflow's job is handed what the step before it gave (a result, a group's results, a
    batch's status) as its first argument, as Celery hands a chain's result on. A folded job's
    function is called with the list of what each `fold` gave."""
    if job.folded:
        return {"args": [job.payload], "kwargs": {}}
    if not job.has_input:
        return job.payload
    args, kwargs = arguments(job.payload)
    return {"args": [job.input, *args], "kwargs": kwargs}


def thread_runner(
    function: JobFunction[Any, Any], threads: HandlerThreads
) -> Callable[[Any], Awaitable[Any]]:
    """Run the function in this process: async on the loop, sync on one of `threads`."""

    async def run(payload: Any) -> Any:
        args, kwargs = arguments(payload)
        if function.is_async:
            # Its own task, so that a cancel (CurrentJob.cancel) stops the handler and nothing else.
            task = asyncio.ensure_future(function.fn(*args, **kwargs))
            current = _CURRENT.get()
            if current is not None:
                current._task = task
            return await task
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()  # the handler's thread sees the task's span
        return await threads.call(loop, functools.partial(context.run, function.fn, *args, **kwargs))

    return run


async def execute(
    run: Callable[[Any], Awaitable[Any]], job: Job, current: CurrentJob | None = None
) -> AttemptOutcome:
    """Run one attempt, in the job's trace when there is one, with `current_job()` set; never
    raises for what the handler did."""
    current = current or CurrentJob(job)
    token = _CURRENT.set(current)
    try:
        if not tracing.wanted(job):  # the common case, without a context manager's cost
            return await _traced(run, job, current, None)
        with tracing.handling(job) as span:
            return await _traced(run, job, current, span)
    finally:
        _CURRENT.reset(token)


async def _traced(
    run: Callable[[Any], Awaitable[Any]], job: Job, current: CurrentJob, span: Any
) -> AttemptOutcome:
    outcome, value = await _attempt(run, given_payload(job), job.timeout_ms, current)
    if outcome.kind == "ok" and job.wants_result:
        outcome = _result(value)
    if outcome.kind != "ok":
        tracing.failed(span, outcome.kind, outcome.message)
    return outcome


def _result(value: Any) -> AttemptOutcome:
    try:
        return AttemptOutcome("ok", result=json.dumps(value).encode())
    except (TypeError, ValueError) as exc:  # the job asked for its result: one it cannot keep is an error
        return _error(TypeError(f"the return value is not JSON-serialisable ({exc})"))


async def _attempt(
    run: Callable[[Any], Awaitable[Any]], payload: Any, timeout_ms: int, current: CurrentJob
) -> tuple[AttemptOutcome, Any]:
    limit = asyncio.timeout(timeout_ms / 1000) if timeout_ms else None
    try:
        if limit is None:  # no time limit (the default): no Timeout to arm and disarm
            value = await run(payload)
        else:
            async with limit:
                value = await run(payload)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if not current.cancelled or (task is not None and task.cancelling()):
            raise  # the worker itself is stopping, not this job
        return AttemptOutcome("cancelled", "cancelled by request", "Cancelled"), None
    except TimeoutError as exc:
        if limit is None or not limit.expired():
            return _error(exc), None  # the handler's own time-out, not ours
        over = TimeLimitExceeded(f"ran past its time limit of {timeout_ms / 1000:g}s")
        return AttemptOutcome("timeout", str(over), "TimeLimitExceeded", error=over), None
    except Retry as retry:
        at = retry.run_at.timestamp() if retry.run_at else time.time() + (retry.delay or 0)
        return AttemptOutcome("retry", str(retry), "Retry", retry_at_ms=int(at * 1000), error=retry), None
    except Kill as kill:
        return AttemptOutcome("kill", str(kill), "Kill", error=kill), None
    except Exception as exc:
        return _error(exc), None
    return _OK, value


def _error(exc: BaseException) -> AttemptOutcome:
    if isinstance(exc, RemoteError):
        return AttemptOutcome("error", str(exc), exc.error_type, exc.backtrace, error=exc)
    return AttemptOutcome(
        "error", str(exc) or repr(exc), type(exc).__qualname__, traceback.format_exc(), error=exc
    )
