"""Enqueue, with unique keys checked against the holder's current status, and folding: a payload
with a fold key joins the waiting job of its queue with that key (which keeps its place) while
the rule allows, else starts a new one."""

from collections.abc import Sequence
from dataclasses import replace

from pyqueue.engine.errors import InvalidArgument
from pyqueue.engine.ids import IdGenerator
from pyqueue.engine.memory import Memory
from pyqueue.engine.model import NewJob, UniqueScope, new_record
from pyqueue.engine.requests.base import Transitions
from pyqueue.engine.retry import JobOptions, RetryPolicy
from pyqueue.engine.view import BatchView, indexed
from pyqueue.store import keys
from pyqueue.store.contract import Family
from pyqueue.store.records import JobRecord, Status

JSON = "application/json"
DEFAULT_FOLD_MAX = 1000
MAX_FOLD = 100_000


def check_fold(index: int, fold_key: str, fold_max: int, content_type: str, unique_key: str) -> int:
    """A fold's fields, checked; the most payloads one job collects."""
    where = f"job {index}: "
    if not fold_key:
        raise InvalidArgument(f"{where}fold_max is given without a fold_key")
    if len(fold_key.encode()) > 256 or not fold_key.isprintable():
        raise InvalidArgument(f"{where}the fold key must be printable and at most 256 bytes")
    if content_type != JSON:
        raise InvalidArgument(
            f"{where}a folded payload must be JSON (content type {JSON}), to fold into an array"
        )
    if unique_key:
        raise InvalidArgument(f"{where}give a unique key or a fold key, not both")
    if not 0 <= fold_max <= MAX_FOLD:
        raise InvalidArgument(f"{where}fold_max must be 1 to {MAX_FOLD} (0: {DEFAULT_FOLD_MAX})")
    return fold_max or DEFAULT_FOLD_MAX


class Enqueue(Transitions):
    def __init__(
        self,
        jobs: Sequence[NewJob],
        ids: IdGenerator,
        memory: Memory,
        max_payload_bytes: int = 1 << 20,
        policy: RetryPolicy | None = None,
    ) -> None:
        super().__init__(memory)
        self.jobs = jobs
        self.ids = ids
        self.max_payload_bytes = max_payload_bytes
        self.policy = policy or RetryPolicy()

    def apply(self, view: BatchView) -> None:
        now = view.now_ms
        created: list[tuple[int, bool]] = []
        for job in self.jobs:
            if job.unique_key:
                holder = _unique_holder(view, job.unique_key, job.unique_scope)
                if holder is not None:
                    created.append((holder, True))
                    continue
            if job.fold_key:
                folded = self._fold(view, job)
                if folded is not None:
                    created.append((folded, True))
                    continue
            record = new_record(job, self.ids.next(now), now, job.run_at_ms, job.options)
            if job.completed_result is not None:
                self._record_completed(view, record, job)
                created.append((record.id, False))
                continue
            scheduled = record.status == Status.SCHEDULED
            if job.fold_key:
                fold = {"k": job.fold_key, "m": job.fold_max, "n": 1}
                record.options = replace(JobOptions.decode(job.options), fold=fold).encode()
                view.put_meta(keys.fold_key(job.queue, job.fold_key), str(record.id).encode())
                view.create(record, b"[" + job.payload + b"]")
            else:
                view.create(record, job.payload)
            (self.scheduled if scheduled else self.ready).append(record)
            created.append((record.id, False))
        self.result = created

    def _record_completed(self, view: BatchView, record: JobRecord, job: NewJob) -> None:
        """A job that ran elsewhere: stored completed with its result, never ready."""
        assert job.completed_result is not None
        view.create(record, job.payload)
        view.batch.put(Family.DATA, keys.result_key(record.id), job.completed_result)
        policy = self.policy.for_job(JobOptions.decode(record.options))
        self.finish(view, record, Status.COMPLETED, policy.keep_completed_ms, job.completed_result)

    def _fold(self, view: BatchView, job: NewJob) -> int | None:
        """Join the waiting job of the fold key, if the rule allows: it waits (scheduled or ready),
        holds fewer than its most payloads, and stays within the payload limit."""
        raw = view.get_meta(keys.fold_key(job.queue, job.fold_key))
        if raw is None:
            return None
        (record,) = view.records([int(raw)])
        if record is None or record.status not in (Status.SCHEDULED, Status.READY):
            return None
        options = JobOptions.decode(record.options)
        fold = dict(options.fold or {})
        if not fold or fold["n"] >= fold["m"]:
            return None
        (payload,) = view.payloads([record.id])
        if len(payload) + 1 + len(job.payload) > self.max_payload_bytes:
            return None
        view.set_payload(record.id, payload[:-1] + b"," + job.payload + b"]")
        fold["n"] += 1
        record.options = replace(options, fold=fold).encode()
        view.save(record, indexed(record))
        return record.id


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
