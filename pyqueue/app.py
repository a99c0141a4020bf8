"""`App` and job functions: the way a Python team declares and enqueues work.

    app = pyqueue.App()

    @app.job(queue="mail", retries=5, timeout=30)
    def send_email(to: str, subject: str) -> None: ...

    send_email.enqueue("ada@example.com", subject="hi")            # checked against the signature now
    send_email.options(delay=60, priority=10).enqueue("b@example.com", subject="later")
    await send_email.enqueue_async("c@example.com", subject="from asyncio")

A job's payload is {"args": [...], "kwargs": {...}} as JSON; arguments that do not fit the
function's signature, or are not JSON, are refused at enqueue time, not in the worker hours later.
"""

import asyncio
import hashlib
import inspect
import json
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

from pyqueue.client import AsyncClient, Client, Job
from pyqueue.client.client import DEFAULT_PRIORITY, default_address
from pyqueue.client.spec import JobSpec
from pyqueue.client.workflows import Chain, Group, StepLike, Task

P = ParamSpec("P")
R = TypeVar("R")


class Retry(Exception):
    """Raise in a handler to retry the job after `delay` seconds (or at `run_at`), not by the backoff."""

    def __init__(
        self,
        delay: float | timedelta | None = None,
        *,
        run_at: datetime | None = None,
        reason: str = "retry requested",
    ) -> None:
        super().__init__(reason)
        self.delay = delay.total_seconds() if isinstance(delay, timedelta) else delay
        self.run_at = run_at


class Kill(Exception):
    """Raise in a handler to make the job dead at once, with `reason` in its error history."""


class ArgumentKey:
    """A key taken from one argument of each call (`@app.job(fair_key="tenant")`), given by
    position or by name; the argument must be there, and becomes the key as text."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.signature = inspect.signature(fn)
        if name not in self.signature.parameters:
            raise TypeError(f"{fn.__qualname__} has no argument {name!r} to take a key from")
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        if self.name not in bound.arguments:
            raise TypeError(f"the key comes from argument {self.name!r}, which this call does not give")
        return str(bound.arguments[self.name])


@dataclass(frozen=True)
class Options:
    """Per-call enqueue options (a job function's defaults, changed with `.options(...)`)."""

    queue: str = "default"
    priority: int = DEFAULT_PRIORITY
    retries: int | None = None
    timeout: float | None = None
    delay: float | timedelta | None = None
    run_at: datetime | None = None
    unique: bool | Callable[..., str] = False
    unique_scope: str = "queued"
    keep_result: float | None = None  # keep the return value this many seconds (job.result())
    # The key its queue's per-key cap counts it under: a string, or a function of the job's
    # arguments (a customer id, say).
    limit_key: str | Callable[..., str] | None = None
    # The key whose turn the job waits for within its priority (fair share): a string, or a
    # function of the job's arguments (`@app.job(fair_key="tenant")` names an argument).
    fair_key: str | Callable[..., str] | None = None

    def spec(self, name: str, payload: dict[str, Any]) -> JobSpec:
        spec: JobSpec = {
            "type": name,
            "payload": payload,
            "queue": self.queue,
            "priority": self.priority,
            "max_retries": self.retries,
            "timeout": self.timeout,
            "delay": self.delay,
            "run_at": self.run_at,
        }
        if self.keep_result is not None:
            spec["keep_result"] = self.keep_result
        if self.limit_key is not None:
            key = self.limit_key
            spec["limit_key"] = key(*payload["args"], **payload["kwargs"]) if callable(key) else key
        if self.fair_key is not None:
            fair = self.fair_key
            spec["fair_key"] = fair(*payload["args"], **payload["kwargs"]) if callable(fair) else fair
        if self.unique:
            if callable(self.unique):
                key = self.unique(*payload["args"], **payload["kwargs"])
            else:
                key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]
            spec["unique_key"] = f"{name}:{key}"
            spec["unique_scope"] = self.unique_scope
        return spec


class JobFunction(Generic[P, R]):
    """A function turned into a job type. Calling it runs it here and now; `enqueue` queues it."""

    def __init__(self, app: "App", fn: Callable[P, R], name: str, options: Options) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.defaults = options
        self.signature = inspect.signature(fn)
        self.is_async = inspect.iscoroutinefunction(fn)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._importable_checked = False

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def payload(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Check the arguments against the signature and JSON now; return the job's payload."""
        self._bind(args, kwargs)
        return self._json(list(args), kwargs)

    def _json(self, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        payload = {"args": args, "kwargs": kwargs}
        try:
            json.dumps(payload)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{self.name}: the arguments must be JSON-serialisable ({exc})") from None
        return payload

    def fold(self, item: Any, *, key: str, max_items: int | None = None) -> Job:
        """Add `item` (JSON) to the waiting job of this function with the fold key `key`, or start
        one: the function is called once with the list of items folded into it. The job keeps its
        place while it waits (with `.options(delay=60)`, one job a minute at most). At most
        `max_items` (default 1000) join one job."""
        return BoundJob(self, self.defaults).fold(item, key=key, max_items=max_items)

    def s(self, *args: Any, **kwargs: Any) -> Task:
        """This call as a workflow step (Celery's signature). A step after another is handed what
        that one gave as its first argument: give the rest here. Checked against the signature
        when the workflow is enqueued."""
        return self._task(self.defaults, args, kwargs, fresh=False)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Task:
        """A step that is handed nothing: its arguments are all here (Celery's immutable
        signature), typed as the function's."""
        return self._task(self.defaults, args, kwargs, fresh=True)

    def _task(self, options: Options, args: tuple[Any, ...], kwargs: dict[str, Any], fresh: bool) -> Task:
        self.enqueuing()
        spec = options.spec(self.name, self._json(list(args), kwargs))

        def check(given: bool) -> None:
            self._bind((object(), *args) if given else args, kwargs)

        return Task(spec, fresh=fresh, check=check, origin=self.app)

    def _bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"{self.name}: {exc} (checked at enqueue against {self.name}{self.signature})"
            ) from None

    def enqueuing(self) -> None:
        """Before the first enqueue: warn if no worker could import this function."""
        if not self._importable_checked:
            self._importable_checked = True
            warn_if_unimportable(self.name)

    def options(self, **changes: Any) -> "BoundJob[P, R]":
        """The same job with other options for the next enqueue: delay, run_at, priority, queue,
        retries, timeout, unique, unique_scope, keep_result, limit_key, fair_key (a string here is
        the key itself)."""
        return BoundJob(self, replace(self.defaults, **changes))

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        return BoundJob(self, self.defaults).enqueue(*args, **kwargs)

    def enqueue_many(self, calls: Iterable[Sequence[Any] | Mapping[str, Any]]) -> list[Job]:
        """Many jobs in one call, all or nothing: each item is a job's positional arguments (a
        tuple or list) or its keyword arguments (a dict). Every item is checked against the
        signature before anything is sent."""
        return BoundJob(self, self.defaults).enqueue_many(calls)

    async def enqueue_many_async(self, calls: Iterable[Sequence[Any] | Mapping[str, Any]]) -> list[Job]:
        return await BoundJob(self, self.defaults).enqueue_many_async(calls)

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        return await BoundJob(self, self.defaults).enqueue_async(*args, **kwargs)

    async def run(self, payload: Any) -> Any:
        """Run the function on a job's payload (sync functions in a worker thread)."""
        args = payload.get("args", []) if isinstance(payload, dict) else []
        kwargs = payload.get("kwargs", {}) if isinstance(payload, dict) else {}
        if self.is_async:
            return await self.fn(*args, **kwargs)  # type: ignore[misc]
        return await asyncio.get_running_loop().run_in_executor(
            self.app.executor, lambda: self.fn(*args, **kwargs)
        )


class UnimportableJobWarning(UserWarning):
    """A job function a worker cannot import: defined in a script run as `__main__`."""


def warn_if_unimportable(name: str) -> None:
    """Say it loudly, once per function, when a job's type names `__main__`: a worker imports its
    app by module name, so it never has such a function and hands the job back (until the server's
    --max-unknown-handbacks makes it dead). Processes that imported pyqueue.testing run their jobs
    in-process (drain()), where `__main__` is fine: they are not warned."""
    if not name.startswith("__main__.") or "pyqueue.testing" in sys.modules:
        return
    warnings.warn(
        f"job type {name!r} is defined in a script run as __main__: no worker can import it, so "
        "its jobs will not run. Define job functions in a module the worker imports "
        "(`pyqueue worker MODULE:app`) and import them from the script, or give @app.job(name=...) "
        "a name the worker's app also registers",
        UnimportableJobWarning,
        stacklevel=5,  # the caller of send_email.enqueue(...)
    )


class BoundJob(Generic[P, R]):
    def __init__(self, function: JobFunction[P, R], options: Options) -> None:
        self.function = function
        self.opts = options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        f = self.function
        f.enqueuing()
        return f.app.client.enqueue(**self.opts.spec(f.name, f.payload(*args, **kwargs)))

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        f = self.function
        f.enqueuing()
        return await f.app.async_client().enqueue(**self.opts.spec(f.name, f.payload(*args, **kwargs)))

    def _specs(self, calls: Iterable[Any]) -> list[JobSpec]:
        f = self.function
        f.enqueuing()
        specs: list[JobSpec] = []
        for call in calls:
            if isinstance(call, Mapping):
                specs.append(self.opts.spec(f.name, f.payload(**call)))
            else:
                specs.append(self.opts.spec(f.name, f.payload(*call)))
        return specs

    def enqueue_many(self, calls: Iterable[Any]) -> list[Job]:
        return self.function.app.client.enqueue_many(self._specs(calls))

    async def enqueue_many_async(self, calls: Iterable[Any]) -> list[Job]:
        return await self.function.app.async_client().enqueue_many(self._specs(calls))

    def fold(self, item: Any, *, key: str, max_items: int | None = None) -> Job:
        f = self.function
        f.enqueuing()
        f._bind([[item]], {})  # called with the list of items
        spec = self.opts.spec(f.name, {"args": [], "kwargs": {}})
        spec["payload"] = item
        spec["fold_key"] = key
        spec["fold_max"] = max_items
        return f.app.client.enqueue(**spec)

    def s(self, *args: Any, **kwargs: Any) -> Task:
        return self.function._task(self.opts, args, kwargs, fresh=False)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Task:
        return self.function._task(self.opts, args, kwargs, fresh=True)


class JobDecorator(Protocol):
    """What `app.job(...)` with options returns: it keeps the decorated function's signature."""

    def __call__(self, fn: Callable[P, R], /) -> JobFunction[P, R]: ...


class App:
    """A set of job functions, and the connection used to enqueue them.

    The address comes from the argument, else PYQUEUE_ADDRESS, else 127.0.0.1:7411."""

    def __init__(
        self, address: str | None = None, *, batching: bool = True, keep_result: float | None = None
    ) -> None:
        self.address = address or default_address()
        self.keep_result = keep_result  # the default of its job functions (seconds; None: no result kept)
        self.batching = batching  # concurrent enqueues share calls (see pyqueue/client/batching.py)
        self.jobs: dict[str, JobFunction[Any, Any]] = {}
        self.periodic_jobs: dict[str, dict[str, Any]] = {}  # name -> entry (Client.set_cron's shape)
        self.queue_limits: dict[str, dict[str, Any]] = {}  # queue -> Client.set_queue_limit's options
        self.executor: Any = None  # the worker sets its handler threads here (an Executor)
        self._client: Client | None = None
        self._async_clients: dict[int, AsyncClient] = {}
        self._lock = threading.Lock()

    @property
    def client(self) -> Client:
        with self._lock:
            if self._client is None:
                self._client = Client(self.address, batching=self.batching)
            return self._client

    def async_client(self) -> AsyncClient:
        """One AsyncClient per event loop (grpc.aio channels belong to the loop that made them)."""
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(id(loop))
        if client is None:
            client = self._async_clients[id(loop)] = AsyncClient(self.address, batching=self.batching)
        return client

    @overload
    def job(self, fn: Callable[P, R], /) -> JobFunction[P, R]: ...

    @overload
    def job(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = DEFAULT_PRIORITY,
        retries: int | None = None,
        timeout: float | None = None,
        unique: bool | Callable[..., str] = False,
        unique_scope: str = "queued",
        keep_result: float | None = None,
        limit_key: str | Callable[..., str] | None = None,
        fair_key: str | Callable[..., str] | None = None,
    ) -> "JobDecorator": ...

    def job(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = DEFAULT_PRIORITY,
        retries: int | None = None,
        timeout: float | None = None,
        unique: bool | Callable[..., str] = False,
        unique_scope: str = "queued",
        keep_result: float | None = None,
        limit_key: str | Callable[..., str] | None = None,
        fair_key: str | Callable[..., str] | None = None,
    ) -> Any:
        """Declare a job type. Its name defaults to the function's import path (module.qualname).
        `keep_result` (seconds; default the app's) keeps each run's return value for
        `job.result()`. `limit_key` (a string, or a function of the job's arguments) is the key
        the queue's per-key cap counts each job under (`app.limit(queue, key_max_running=N)`).
        `fair_key` (the name of one of the function's arguments, or a function of them) is the
        key (a tenant, say) whose turn each job waits for: the queue serves its keys in turn."""
        options = Options(
            queue=queue,
            priority=priority,
            retries=retries,
            timeout=timeout,
            unique=unique,
            unique_scope=unique_scope,
            keep_result=keep_result if keep_result is not None else self.keep_result,
            limit_key=limit_key,
        )

        def register(f: Callable[..., Any]) -> JobFunction[Any, Any]:
            job_name = name or f"{f.__module__}.{f.__qualname__}"
            if job_name in self.jobs:
                raise ValueError(f"a job named {job_name!r} is already registered")
            fair = ArgumentKey(f, fair_key) if isinstance(fair_key, str) else fair_key
            function = JobFunction(self, f, job_name, replace(options, fair_key=fair))
            self.jobs[job_name] = function
            return function

        return register(fn) if fn is not None else register

    def periodic(
        self,
        schedule: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Callable[[JobFunction[P, R]], JobFunction[P, R]]:
        """Run a job function on a cron schedule kept by the server: put it above `@app.job`.

        `schedule` has 5 fields, or 6 with seconds first; `tz` is an IANA timezone. Each tick
        enqueues the function with `args` and `kwargs` (checked against its signature now).
        `pyqueue worker` declares the app's periodic jobs when it starts (idempotent, like a
        config file; see `declare_periodic`), and the server enqueues each tick once, however
        many workers run."""

        def register(function: JobFunction[P, R]) -> JobFunction[P, R]:
            if not isinstance(function, JobFunction):
                raise TypeError("@app.periodic goes above @app.job (it needs a job function)")
            entry = name or function.name
            if entry in self.periodic_jobs:
                raise ValueError(f"a periodic job named {entry!r} is already declared")
            job = function.defaults.spec(function.name, function.payload(*args, **(kwargs or {})))
            self.periodic_jobs[entry] = {"name": entry, "schedule": schedule, "timezone": tz, "job": job}
            return function

        return register

    def limit(
        self,
        queue: str,
        *,
        max_running: int = 0,
        rate: float | str | None = None,
        burst: float = 0,
        key_max_running: int = 0,
    ) -> None:
        """Declare a queue's limits (see Client.set_queue_limit); `pyqueue worker` sets them on the
        server when it starts, like the periodic jobs."""
        self.queue_limits[queue] = {
            "max_running": max_running,
            "rate": rate,
            "burst": burst,
            "key_max_running": key_max_running,
        }

    def declare_periodic(self) -> list[Any]:
        """Send the app's periodic jobs to the server (what `pyqueue worker` does when it starts)."""
        return self.client.set_cron(self.periodic_jobs.values()) if self.periodic_jobs else []

    def resolve(self, name: str) -> "JobFunction[Any, Any] | None":
        """The job function for a job type (subclasses may find them elsewhere)."""
        return self.jobs.get(name)

    @property
    def queues(self) -> list[str]:
        return sorted({f.defaults.queue for f in self.jobs.values()})

    # Workflows (docs/workflows.md): steps are job functions' .s(...) and .si(...).
    def chain(self, *steps: StepLike) -> Chain:
        """Steps that run one after another, each handed the last one's result."""
        return Chain(*steps)

    def group(
        self,
        members: Iterable[StepLike],
        *,
        on_success: StepLike | None = None,
        on_complete: StepLike | None = None,
        name: str = "",
    ) -> Group:
        """Jobs started together, as one batch; `.then(step)` runs `step` with their results."""
        return Group(members, on_success=on_success, on_complete=on_complete, name=name)

    def close(self) -> None:
        """Close the app's connections; the next enqueue opens new ones (to the current address)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
            self._client = None
            self._async_clients = {}
