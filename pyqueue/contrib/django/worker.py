"""The worker's side of the Django backend: `app` runs any Django task by its import path, with
the database connections looked after as Django's request cycle does."""

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any

from pyqueue.app import App, JobFunction, Options
from pyqueue.contrib.django.tasks_api import Task


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
