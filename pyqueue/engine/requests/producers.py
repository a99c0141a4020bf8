"""Enqueue, with unique keys checked against the holder's current status."""

from collections.abc import Sequence

from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import NewJob, UniqueScope
from pyqueue.engine.requests.base import Transitions
from pyqueue.engine.view import BatchView
from pyqueue.store.records import JobRecord, Status


class Enqueue(Transitions):
    def __init__(self, jobs: Sequence[NewJob], ids: IdGenerator, memory: Memory) -> None:
        super().__init__(memory)
        self.jobs = jobs
        self.ids = ids

    def apply(self, view: BatchView) -> None:
        now = view.now_ms
        created: list[tuple[int, bool]] = []
        for job in self.jobs:
            if job.unique_key:
                holder = _unique_holder(view, job.unique_key, job.unique_scope)
                if holder is not None:
                    created.append((holder, True))
                    continue
            scheduled = job.run_at_ms > now
            record = JobRecord(
                id=self.ids.next(now),
                status=Status.SCHEDULED if scheduled else Status.READY,
                queue=job.queue,
                type=job.type,
                priority=job.priority,
                created_ms=now,
                updated_ms=now,
                content_type=job.content_type,
                run_at_ms=job.run_at_ms if scheduled else 0,
                max_retries=job.max_retries,
                timeout_ms=job.timeout_ms,
                options=job.options,
                unique_key=job.unique_key,
                limit_key=job.limit_key,
            )
            view.create(record, job.payload)
            (self.scheduled if scheduled else self.ready).append(record)
            created.append((record.id, False))
        self.result = created


_BLOCKING = {
    UniqueScope.QUEUED: {Status.SCHEDULED, Status.READY},
    UniqueScope.ACTIVE: {Status.SCHEDULED, Status.READY, Status.IN_FLIGHT},
    UniqueScope.EXISTS: set(Status),
}


def _unique_holder(view: BatchView, key: str, scope: int) -> int | None:
    """The job that holds `key` now, if its status blocks a new job in `scope`."""
    holder = view.unique_holder(key)
    if holder is None:
        return None
    (record,) = view.records([holder])
    return holder if record is not None and record.status in _BLOCKING[scope] else None
