"""The Django Tasks backend: `task.enqueue()` goes to pyqueue, at once or through the outbox.

Priorities map from Django's -100 (last) .. 100 (first) onto pyqueue's 0 (first) .. 65535.
Results: status, timestamps, attempts and errors come from the job, and `return_value` from the
result the job keeps (for KEEP_COMPLETED seconds, like the job). `takes_context` tasks are refused.

With OPTIONS "OUTBOX" (True for the "default" database, or a database alias), an enqueue is a row
written on that database's connection, committed with the caller's transaction; its result id is
`outbox/QUEUE/ROW`, and get_result finds the row while it waits and the job once it is relayed.
"""

import json
from datetime import UTC, datetime
from typing import Any

from pyqueue import defaults
from pyqueue.client import Client, Job
from pyqueue.contrib.django.tasks_api import (
    BaseTaskBackend,
    InvalidTaskError,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from pyqueue.contrib.outbox_rows import TABLE, row_key
from pyqueue.errors import NotFound

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
        outbox = self.options.get("OUTBOX", False)
        self.outbox_database: str | None = "default" if outbox is True else (outbox or None)
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
        spec = {
            "type": task.module_path,
            "payload": {"args": list(args), "kwargs": dict(kwargs)},
            "queue": task.queue_name,
            "priority": to_pyqueue_priority(task.priority),
            "run_at": task.run_after,
            "keep_completed": self.keep_completed,
            "keep_result": self.keep_completed,
        }
        if self.outbox_database is not None:
            from pyqueue.contrib.django.outbox import Outbox

            row = Outbox(self.outbox_database).enqueue_spec(spec)
            result_id = f"outbox/{task.queue_name}/{row.pk}"
            return self._waiting(task, result_id, row.created_at, list(args), dict(kwargs), [])
        job = self.client.enqueue(spec.pop("type"), spec.pop("payload"), **spec)
        return self._result(task, job, [], list(args), dict(kwargs))

    def get_result(self, result_id: str) -> Any:
        try:
            if result_id.startswith("outbox/"):
                return self._outbox_result(result_id)
            job = self.client.get_job(int(result_id))
        except (NotFound, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        return self._job_result(job)

    def _outbox_result(self, result_id: str) -> Any:
        """The job the row became, or the row while it waits (or was refused).

        The row is read first: the relay deletes it only after the server holds the job, so a row
        not found means the job is there (or never was), and a row found but no job yet means it
        still waits. Asking the server first would leave a gap: a relay that moves the row between
        the two reads makes both miss."""
        from django.utils.module_loading import import_string

        from pyqueue.contrib.django.outbox.models import OutboxRow
        from pyqueue.contrib.outbox_rows import from_row

        _, queue, row_id = result_id.split("/")
        row = OutboxRow.objects.using(self.outbox_database or "default").filter(pk=int(row_id)).first()
        try:
            return self._job_result(self.client.job_by_key(queue, row_key(TABLE, int(row_id))))
        except NotFound:
            if row is None:
                raise
        spec = from_row(row.spec, row.created_at)
        errors = (
            []
            if row.refused is None
            else [TaskError(exception_class_path="pyqueue.Refused", traceback=row.refused)]
        )
        found = spec.get("payload")
        payload: dict[str, Any] = found if isinstance(found, dict) else {}
        task = import_string(spec["type"])
        return self._waiting(
            task, result_id, row.created_at, payload.get("args", []), payload.get("kwargs", {}), errors
        )

    def _waiting(
        self,
        task: Any,
        result_id: str,
        created_at: float,
        args: list[Any],
        kwargs: dict[str, Any],
        errors: list[Any],
    ) -> Any:
        return TaskResult(
            task=task,
            id=result_id,
            status=TaskResultStatus.FAILED if errors else TaskResultStatus.READY,
            enqueued_at=datetime.fromtimestamp(created_at, UTC),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=errors,
            worker_ids=[],
        )

    def _job_result(self, job: Job) -> Any:
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
