"""One commit's view of the store: reads see the commit's own earlier writes.

Several requests share one WriteBatch, and a later request may touch a job an earlier one just
changed (an ack and a requeue of the same job, say). Reads therefore go through an overlay of the
records this batch has written, and every write keeps the indexes in step with the record: the
status, queue and type index entries change in the same batch as the record they point at.

Records read here are the caller's to mutate: take `indexed(record)` first, change the record in
place, then `save(record, before)`. No copies are made on this hot path.

In-flight records are also kept in a cache owned by the single writer (`InFlightCache`), so an ack
needs no read: the writer is the only one that changes records, and the cache is updated only
after the batch that changed them was written.
"""

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyqueue._native import create_entries, delete_keys, save_entries
from pyqueue.engine.counts import Counts
from pyqueue.engine.retry import JobOptions
from pyqueue.store import keys
from pyqueue.store.contract import Batch, Family, Store
from pyqueue.store.records import IN_FLIGHT, SCHEDULED, JobRecord, Status

if TYPE_CHECKING:
    from pyqueue.engine.flows.context import Flows

Indexed = tuple[Status, int, int, str]
"""What the status and queue index entries are derived from: status, priority, timer, queue."""


def indexed(record: JobRecord) -> Indexed:
    status = record.status
    return (
        status,
        record.priority,
        record.run_at_ms if status == SCHEDULED else record.expires_ms,
        record.queue,
    )


class InFlightCache:
    """Records of jobs in flight, as last written by the single writer, and the job counts."""

    def __init__(self, counts: Counts | None = None) -> None:
        self.records: dict[int, JobRecord] = {}
        self.counts = counts or Counts()

    def publish(self, changed: dict[int, JobRecord | None]) -> None:
        for job_id, record in changed.items():
            if record is not None and record.status == IN_FLIGHT:
                self.records[job_id] = record
            else:
                self.records.pop(job_id, None)

    def clear(self) -> None:
        self.records.clear()


class BatchView:
    def __init__(
        self, store: Store, now_ms: int, cache: InFlightCache | None = None, flows: "Flows | None" = None
    ) -> None:
        self.store = store
        self.flows = flows  # workflow bookkeeping (engine/flows); None where there is none (tests)
        self.batch: Batch = store.batch()
        self.now_ms = now_ms
        self._cache = cache or InFlightCache()
        self._seen: dict[int, JobRecord | None] = {}
        self._changed: dict[int, JobRecord | None] = {}
        self._payloads: dict[int, bytes | None] = {}
        self._unique: dict[str, int | None] = {}
        self._counts: Counter[tuple[str, int]] = Counter()
        # For metrics (telemetry.py): (event, queue) counts and ready-to-delivered waits.
        self.events: defaultdict[tuple[str, str], int] = defaultdict(int)  # faster than a Counter
        self.waits: dict[str, list[float]] = {}
        self._meta: dict[bytes, bytes | None] = {}
        self.left_flight: defaultdict[str, int] = defaultdict(int)  # queue -> jobs that left flight
        self.left_flight_keyed: defaultdict[str, list[int]] = defaultdict(list)  # those with a limit key

    def records(self, job_ids: Sequence[int]) -> list[JobRecord | None]:
        seen, cached = self._seen, self._cache.records
        missing = []
        for job_id in job_ids:
            if job_id not in seen:
                record = cached.get(job_id)
                if record is None:
                    missing.append(job_id)
                else:
                    seen[job_id] = record
        if missing:
            raws = self.store.get_many(Family.DATA, [keys.job_key(i) for i in missing])
            for job_id, raw in zip(missing, raws, strict=True):
                seen[job_id] = None if raw is None else JobRecord.decode(job_id, raw)
        return [seen[i] for i in job_ids]

    def payloads(self, job_ids: Sequence[int]) -> list[bytes]:
        missing = [i for i in job_ids if i not in self._payloads]
        if missing:
            raws = self.store.get_many(Family.DATA, [keys.payload_key(i) for i in missing])
            for job_id, raw in zip(missing, raws, strict=True):
                self._payloads[job_id] = raw
        return [self._payloads[i] or b"" for i in job_ids]

    def create(self, record: JobRecord, payload: bytes) -> None:
        job_key, value, payload_key, status_key, status_value, queue_key, type_key = create_entries(record)
        batch = self.batch
        batch.put_data(job_key, value)
        batch.put_data(payload_key, payload)
        put_index = batch.put_index
        put_index(status_key, status_value)
        put_index(queue_key, b"")
        put_index(type_key, b"")
        if record.unique_key:
            self.set_unique(record.unique_key, record.id)
        self._seen[record.id] = self._changed[record.id] = record
        self._payloads[record.id] = payload
        self._counts[record.queue, record.status] += 1
        self.events["enqueued", record.queue] += 1

    def save(self, record: JobRecord, before: Indexed) -> None:
        """Write `record`, changed in place since `before = indexed(record)`, moving its index
        entries: one native call builds the record's bytes and every key that moves."""
        record.updated_ms = self.now_ms
        batch = self.batch
        job_key, value, old_status_key, status_key, status_value, old_queue_key, queue_key = save_entries(
            record, *before
        )
        batch.put_data(job_key, value)
        if status_key is not None:  # what the entries derive from changed
            assert status_value is not None
            if old_status_key is not None:
                batch.delete_index(old_status_key)
            batch.put_index(status_key, status_value)
            old_status, _, _, old_queue = before
            status = record.status
            if old_status == IN_FLIGHT and status != IN_FLIGHT:
                self._left_flight(old_queue, record)
            if queue_key is not None:  # its queue or its status changed
                assert old_queue_key is not None
                batch.delete_index(old_queue_key)
                batch.put_index(queue_key, b"")
                counts = self._counts
                counts[old_queue, old_status] -= 1
                counts[record.queue, status] += 1
        self._seen[record.id] = self._changed[record.id] = record

    def _left_flight(self, queue: str, record: JobRecord) -> None:
        self.left_flight[queue] += 1
        if record.limit_key:
            self.left_flight_keyed[queue].append(record.id)

    def delete(self, record: JobRecord) -> None:
        """Remove the job with its payload, error records and every index entry."""
        if record.status == IN_FLIGHT:
            self._left_flight(record.queue, record)
        delete_data, delete_index = self.batch.delete_data, self.batch.delete_index
        job_key, payload_key, status_key, queue_key, type_key = delete_keys(record)
        delete_data(job_key)
        delete_data(payload_key)
        if record.options:
            options = JobOptions.decode(record.options)
            if options.keep_result_ms is not None:
                delete_data(keys.result_key(record.id))
            if options.flow:
                delete_index(keys.flow_job_key(options.flow["w"], record.id))
            if (
                options.fold
                and self.get_meta(keys.fold_key(record.queue, options.fold["k"])) == str(record.id).encode()
            ):
                self.put_meta(keys.fold_key(record.queue, options.fold["k"]), None)
        if record.errors:
            for attempt in range(1, record.attempts + 1):
                delete_data(keys.error_key(record.id, attempt))
        delete_index(status_key)
        delete_index(queue_key)
        delete_index(type_key)
        if record.unique_key and self.unique_holder(record.unique_key) == record.id:
            delete_index(keys.unique_key(record.unique_key))
            self._unique[record.unique_key] = None
        self._seen[record.id] = self._changed[record.id] = None
        self._payloads[record.id] = None
        self._counts[record.queue, record.status] -= 1

    def set_payload(self, job_id: int, payload: bytes) -> None:
        self.batch.put_data(keys.payload_key(job_id), payload)
        self._payloads[job_id] = payload

    def unique_holder(self, key: str) -> int | None:
        """The job that holds a unique key (if it still exists is the caller's to check)."""
        if key not in self._unique:
            raw = self.store.get(Family.INDEX, keys.unique_key(key))
            self._unique[key] = int.from_bytes(raw, "big") if raw else None
        return self._unique[key]

    def set_unique(self, key: str, job_id: int) -> None:
        self.batch.put_index(keys.unique_key(key), job_id.to_bytes(8, "big"))
        self._unique[key] = job_id

    def get_meta(self, key: bytes) -> bytes | None:
        """A server metadata value as this batch leaves it (an earlier request may have set it)."""
        if key in self._meta:
            return self._meta[key]
        return self.store.get(Family.DATA, key)

    def put_meta(self, key: bytes, value: bytes | None) -> None:
        """Set (None: delete) a server metadata value in this batch."""
        self._meta[key] = value
        if value is None:
            self.batch.delete(Family.DATA, key)
        else:
            self.batch.put(Family.DATA, key, value)

    @property
    def jobs_changed(self) -> int:
        return len(self._changed)

    def publish(self) -> None:
        """After the batch is written: the writer's cache and the counts take this batch's changes."""
        self._cache.publish(self._changed)
        self._cache.counts.apply(self._counts)
