"""A Django Tasks backend: `@task` functions enqueue into pyqueue and run in `pyqueue worker`.

    TASKS = {"default": {
        "BACKEND": "pyqueue.contrib.django.PyQueueBackend",
        "QUEUES": ["default", "mail"],
        "OPTIONS": {"ADDRESS": "127.0.0.1:7411", "KEEP_COMPLETED": 86400},
    }}

Run the tasks with `DJANGO_SETTINGS_MODULE=... pyqueue worker pyqueue.contrib.django:app`.

Uses Django's own `django.tasks` (Django 6+), or the `django-tasks` backport on older Django.
Priorities map from Django's -100 (last) .. 100 (first) onto pyqueue's 0 (first) .. 65535.
Results: status, timestamps, attempts and errors come from the job, and `return_value` from the
result the job keeps (for KEEP_COMPLETED seconds, like the job). `takes_context` tasks are refused.
Database connections are looked after as Django's request cycle does: a sync task starts and ends
with `close_old_connections()`, so a worker thread never runs a job on a connection the database
dropped, nor keeps one open between jobs past CONN_MAX_AGE.
"""

import functools
import inspect
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pyqueue import defaults
from pyqueue.app import App, JobFunction, Options
from pyqueue.client import Client, Job
from pyqueue.errors import NotFound

try:  # Django 6+
    from django.tasks import TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # the backport
    from django_tasks import TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist

_STATUS = {
    "scheduled": TaskResultStatus.READY,
    "ready": TaskResultStatus.READY,
    "in_flight": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


def to_pyqueue_priority(priority: int) -> int:
    """Django: larger runs first, -100..100. pyqueue: smaller runs first, 0..65535."""
    return defaults.PRIORITY - priority * 300


class PyQueueBackend(BaseTaskBackend):  # type: ignore[misc]
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.address = self.options.get("ADDRESS")
        self.keep_completed = float(self.options.get("KEEP_COMPLETED", 86400))
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.address)
        return self._client

    def validate_task(self, task: Any) -> None:
        super().validate_task(task)
        if task.takes_context:
            raise InvalidTaskError("pyqueue does not pass a task context; drop takes_context")

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        job = self.client.enqueue(
            task.module_path,
            {"args": list(args), "kwargs": dict(kwargs)},
            queue=task.queue_name,
            priority=to_pyqueue_priority(task.priority),
            run_at=task.run_after,
            keep_completed=self.keep_completed,
            keep_result=self.keep_completed,
        )
        return self._result(task, job, [], list(args), dict(kwargs))

    def get_result(self, result_id: str) -> Any:
        try:
            job = self.client.get_job(int(result_id))
        except (NotFound, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        from django.utils.module_loading import import_string

        task = import_string(job.type)
        errors = [
            TaskError(exception_class_path=e.error_type or "Exception", traceback=e.backtrace or e.message)
            for e in self.client.job_errors(job.id)
        ]
        payload = job.payload if isinstance(job.payload, dict) else {}
        return self._result(task, job, errors, payload.get("args", []), payload.get("kwargs", {}))

    def _result(self, task: Any, job: Job, errors: list[Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        finished = job.status in ("completed", "dead")
        result = TaskResult(
            task=task,
            id=str(job.id),
            status=_STATUS.get(job.status, TaskResultStatus.READY),
            enqueued_at=job.created_at or datetime.now(UTC),
            started_at=job.updated_at if job.attempts else None,
            last_attempted_at=job.updated_at if job.attempts else None,
            finished_at=job.updated_at if finished else None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=errors,
            worker_ids=["pyqueue"] * job.attempts,
        )
        if job.status == "completed" and job._result:  # TaskResult is frozen: backends set it so
            object.__setattr__(result, "_return_value", json.loads(job._result))
        return result


class DjangoApp(App):
    """The worker's side: any job type is the import path of a Django task."""

    def __init__(self, address: str | None = None) -> None:
        super().__init__(address)
        self._ready = False
        self._configs: list[dict[str, Any]] = []

    def _setup(self) -> None:
        if self._ready:
            return
        import django
        from django.conf import settings

        django.setup()
        self._ready = True
        self._configs = [
            c
            for c in getattr(settings, "TASKS", {}).values()
            if c.get("BACKEND", "").endswith("PyQueueBackend")
        ]
        # PYQUEUE_ADDRESS (or the worker's --address) wins; otherwise the backend's own setting.
        configured = next(
            (
                c.get("OPTIONS", {}).get("ADDRESS")
                for c in self._configs
                if c.get("OPTIONS", {}).get("ADDRESS")
            ),
            None,
        )
        if configured and "PYQUEUE_ADDRESS" not in os.environ:
            self.address = configured

    def resolve(self, name: str) -> JobFunction[Any, Any] | None:
        self._setup()
        function = self.jobs.get(name)
        if function is None:
            from django.utils.module_loading import import_string

            try:
                task = import_string(name)
            except ImportError:
                return None
            if not isinstance(task, Task):
                return None
            function = self.jobs[name] = JobFunction(
                self, _in_connection_cycle(task.func), name, Options(queue=task.queue_name)
            )
        return function

    @property
    def queues(self) -> list[str]:
        self._setup()
        return sorted({q for c in self._configs for q in c.get("QUEUES", ["default"])}) or ["default"]


def _in_connection_cycle(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` between two `close_old_connections()`, as Django wraps a request: each worker thread
    holds its own connections, and without this one the database closed (a restart, an idle
    timeout, a pooler) would fail every later job on that thread, and CONN_MAX_AGE would never
    apply. Async tasks are left as they are: their queries share sync_to_async's one thread with
    every other async task in flight, so a close between them would cut into another task."""
    if inspect.iscoroutinefunction(fn):
        return fn
    from django.db import close_old_connections, reset_queries

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        reset_queries()
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return run


app = DjangoApp()
