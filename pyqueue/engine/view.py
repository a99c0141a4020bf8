"""One commit's view of the store: reads see the commit's own earlier writes.

Several requests share one WriteBatch, and a later request may touch a job an earlier one just
changed (an ack and a requeue of the same job, say). Reads therefore go through an overlay of the
records this batch has written, and every write keeps the indexes in step with the record: the
status, queue and type index entries change in the same batch as the record they point at.
"""

import copy
from collections.abc import Sequence

from pyqueue.store import keys
from pyqueue.store.contract import Batch, Family, Store
from pyqueue.store.records import JobRecord, Status

_DELETED = None


class BatchView:
    def __init__(self, store: Store, now_ms: int) -> None:
        self.store = store
        self.batch: Batch = store.batch()
        self.now_ms = now_ms
        self._records: dict[int, JobRecord | None] = {}
        self._payloads: dict[int, bytes | None] = {}

    def records(self, job_ids: Sequence[int]) -> list[JobRecord | None]:
        """Current records (copies: mutate freely, then `save`)."""
        missing = [i for i in job_ids if i not in self._records]
        if missing:
            raws = self.store.get_many(Family.DATA, [keys.job_key(i) for i in missing])
            for job_id, raw in zip(missing, raws, strict=True):
                self._records[job_id] = None if raw is None else JobRecord.decode(job_id, raw)
        out = []
        for job_id in job_ids:
            record = self._records[job_id]
            out.append(None if record is None else copy.copy(record))
        return out

    def payloads(self, job_ids: Sequence[int]) -> list[bytes]:
        missing = [i for i in job_ids if i not in self._payloads]
        if missing:
            raws = self.store.get_many(Family.DATA, [keys.payload_key(i) for i in missing])
            for job_id, raw in zip(missing, raws, strict=True):
                self._payloads[job_id] = raw
        return [self._payloads[i] or b"" for i in job_ids]

    def create(self, record: JobRecord, payload: bytes) -> None:
        put = self.batch.put
        put(Family.DATA, keys.job_key(record.id), record.encode())
        put(Family.DATA, keys.payload_key(record.id), payload)
        put(Family.INDEX, keys.status_key(record.status, record.id), record.status_value())
        put(Family.INDEX, keys.queue_key(record.queue, record.id), b"")
        put(Family.INDEX, keys.type_key(record.type, record.id), b"")
        self._records[record.id] = copy.copy(record)
        self._payloads[record.id] = payload

    def save(self, old: JobRecord, new: JobRecord) -> None:
        """Write `new` over `old` (as read from this view), moving its index entries."""
        new.updated_ms = self.now_ms
        self.batch.put(Family.DATA, keys.job_key(new.id), new.encode())
        if (old.status, old.priority, old.run_at_ms, old.queue) != (
            new.status,
            new.priority,
            new.run_at_ms,
            new.queue,
        ):
            if old.status != new.status:
                self.batch.delete(Family.INDEX, keys.status_key(old.status, old.id))
            self.batch.put(Family.INDEX, keys.status_key(new.status, new.id), new.status_value())
        if old.queue != new.queue:
            self.batch.delete(Family.INDEX, keys.queue_key(old.queue, old.id))
            self.batch.put(Family.INDEX, keys.queue_key(new.queue, new.id), b"")
        self._records[new.id] = copy.copy(new)

    def delete(self, record: JobRecord) -> None:
        """Remove the job with its payload, error records and every index entry."""
        delete = self.batch.delete
        delete(Family.DATA, keys.job_key(record.id))
        delete(Family.DATA, keys.payload_key(record.id))
        for attempt in range(1, record.attempts + 1):
            delete(Family.DATA, keys.error_key(record.id, attempt))
        delete(Family.INDEX, keys.status_key(record.status, record.id))
        delete(Family.INDEX, keys.queue_key(record.queue, record.id))
        delete(Family.INDEX, keys.type_key(record.type, record.id))
        self._records[record.id] = _DELETED
        self._payloads[record.id] = _DELETED


def is_status(record: JobRecord | None, status: Status) -> bool:
    return record is not None and record.status == status
