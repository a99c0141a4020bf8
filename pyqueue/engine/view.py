"""One commit's view of the store: reads see the commit's own earlier writes.

Several requests share one WriteBatch, and a later request may touch a job an earlier one just
changed (an ack and a requeue of the same job, say). Reads therefore go through an overlay of the
records this batch has written, and every write keeps the indexes in step with the record: the
status, queue and type index entries change in the same batch as the record they point at.

Records read here are the caller's to mutate: take `indexed(record)` first, change the record in
place, then `save(record, before)`. No copies are made on this hot path.

A request's job writes cross into the native crate once, at its end (`flush`): `create` and
`save` note the job, and `flush` hands every noted job over in one call, which encodes each
record in its final state and works out the index entries that move. A job changed twice in one
request is encoded once. Until then only the view's own overlay holds the change, so nothing
else may write a job's record or index keys: they are the view's alone.

In-flight records are also kept in a cache owned by the single writer (`InFlightCache`), so an ack
needs no read: the writer is the only one that changes records, and the cache is updated only
after the batch that changed them was written.
"""

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyqueue._native import job_writes
from pyqueue.engine.counts import Counts
from pyqueue.engine.retry import JobOptions
from pyqueue.store import keys
from pyqueue.store.contract import Batch, Family, Store
from pyqueue.store.records import IN_FLIGHT, SCHEDULED, JobRecord, Status

if TYPE_CHECKING:
    from pyqueue.engine.flows.context import Flows

Indexed = tuple[Status, int, int, str]
"""What the status and queue index entries are derived from: status, priority, timer, queue."""

Noted = tuple[JobRecord, Indexed | None, bytes | None, bool]
"""A job written in this request: its record; what its stored entries derive from (None: created
in this request); its payload, if created; whether it is deleted."""


def dump_doc(doc: Any) -> bytes:
    """A JSON metadata value's stored form (compact)."""
    return json.dumps(doc, separators=(",", ":")).encode()


class JobWriteError(Exception):
    """A job's record or keys the formats cannot hold (a bug, or a check that let it through).
    `stored_id` names the job if it was stored before this request (the one to blame); a job
    created in this request has no such id: the job being handled made it."""

    def __init__(self, job_id: int, created: bool, message: str) -> None:
        super().__init__(f"job {job_id}: {message}")
        self.stored_id = None if created else job_id


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
        self._noted: dict[int, Noted] = {}  # written by this request, not yet flushed
        self._payloads: dict[int, bytes | None] = {}
        self._unique: dict[str, int | None] = {}
        self._counts: Counter[tuple[str, int]] = Counter()
        # For metrics (telemetry.py): (event, queue) counts and ready-to-delivered waits.
        self.events: defaultdict[tuple[str, str], int] = defaultdict(int)  # faster than a Counter
        self.waits: dict[str, list[float]] = {}
        self._meta: dict[bytes, bytes | None] = {}
        self._docs: dict[bytes, Any] = {}  # JSON metadata changed by this request, written by `flush`
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
            for job_id, record in zip(missing, JobRecord.decode_many(missing, raws), strict=True):
                seen[job_id] = record
        return [seen[i] for i in job_ids]

    def payloads(self, job_ids: Sequence[int]) -> list[bytes]:
        missing = [i for i in job_ids if i not in self._payloads]
        if missing:
            raws = self.store.get_many(Family.DATA, [keys.payload_key(i) for i in missing])
            for job_id, raw in zip(missing, raws, strict=True):
                self._payloads[job_id] = raw
        return [self._payloads[i] or b"" for i in job_ids]

    def create(self, record: JobRecord, payload: bytes) -> None:
        self._noted[record.id] = (record, None, payload, False)
        if record.unique_key:
            self.set_unique(record.unique_key, record.id)
        self._seen[record.id] = self._changed[record.id] = record
        self._payloads[record.id] = payload
        self.events["enqueued", record.queue] += 1

    def save(self, record: JobRecord, before: Indexed) -> None:
        """Write `record`, changed in place since `before = indexed(record)`: noted now, encoded
        with the request's other jobs by `flush`."""
        record.updated_ms = self.now_ms
        if before[0] == IN_FLIGHT and record.status != IN_FLIGHT:
            self._left_flight(before[3], record)
        noted = self._noted.get(record.id)
        if noted is None:
            self._noted[record.id] = (record, before, None, False)
        elif noted[0] is not record:  # the same job read afresh: keep where its entries stand
            self._noted[record.id] = (record, noted[1], noted[2], noted[3])
        self._seen[record.id] = self._changed[record.id] = record

    def flush(self) -> None:
        """Hand the request's noted jobs to the batch: one native call builds every record and
        index write, and the counts follow each job from where the store has it to where it ends.
        The JSON documents it changed are encoded once each."""
        if self._docs:
            docs, self._docs = self._docs, {}
            for key, doc in docs.items():
                self.put_meta(key, dump_doc(doc))
        if not self._noted:
            return
        noted = list(self._noted.values())
        self._noted.clear()
        try:
            data, index, data_deletes, index_deletes = job_writes(noted)
        except (ValueError, OverflowError, TypeError):
            _blame(noted)
            raise
        self.batch.write_many(data, index, data_deletes, index_deletes)
        counts = self._counts
        for record, before, _, deleted in noted:
            status, queue = record.status, record.queue
            if before is None:
                counts[queue, status] += 1
                continue
            old_status, _, _, old_queue = before
            if deleted:
                counts[old_queue, old_status] -= 1
            elif old_status != status or old_queue != queue:
                counts[old_queue, old_status] -= 1
                counts[queue, status] += 1

    def _left_flight(self, queue: str, record: JobRecord) -> None:
        self.left_flight[queue] += 1
        if record.limit_key:
            self.left_flight_keyed[queue].append(record.id)

    def delete(self, record: JobRecord) -> None:
        """Remove the job with its payload, error records and every index entry: its own keys
        with the request's other job writes (`flush`), what it keeps beside them now."""
        if record.status == IN_FLIGHT:
            self._left_flight(record.queue, record)
        noted = self._noted.get(record.id)
        if noted is None:
            self._noted[record.id] = (record, indexed(record), None, True)
        elif noted[1] is None:  # created in this request: none of its own keys is written yet
            del self._noted[record.id]
        else:
            self._noted[record.id] = (record, noted[1], None, True)
        self._delete_extras(record)
        self._seen[record.id] = self._changed[record.id] = None
        self._payloads[record.id] = None

    def _delete_extras(self, record: JobRecord) -> None:
        """What a job keeps beside its own keys: its result, workflow and fold entries, its error
        records and its unique key."""
        delete_data, delete_index = self.batch.delete_data, self.batch.delete_index
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
        if record.unique_key and self.unique_holder(record.unique_key) == record.id:
            delete_index(keys.unique_key(record.unique_key))
            self._unique[record.unique_key] = None

    def set_payload(self, job_id: int, payload: bytes) -> None:
        noted = self._noted.get(job_id)
        if noted is not None and noted[1] is None:  # created in this request: put with it
            self._noted[job_id] = (noted[0], None, payload, False)
        else:
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
        if key in self._docs:
            return dump_doc(self._docs[key])
        if key in self._meta:
            return self._meta[key]
        return self.store.get(Family.DATA, key)

    def put_meta(self, key: bytes, value: bytes | None) -> None:
        """Set (None: delete) a server metadata value in this batch."""
        self._docs.pop(key, None)
        self._meta[key] = value
        if value is None:
            self.batch.delete(Family.DATA, key)
        else:
            self.batch.put(Family.DATA, key, value)

    def get_doc(self, key: bytes) -> Any:
        """A JSON metadata value, parsed (None: there is none). One this request changed is the
        object it put, so many changes to one document in a request cost one encoding."""
        if key in self._docs:
            return self._docs[key]
        raw = self.get_meta(key)
        return None if raw is None else json.loads(raw)

    def put_doc(self, key: bytes, doc: Any) -> None:
        """Set a JSON metadata value; it is encoded when the request ends (`flush`)."""
        self._docs[key] = doc

    @property
    def jobs_changed(self) -> int:
        return len(self._changed)

    def publish(self) -> None:
        """After the batch is written: the writer's cache and the counts take this batch's changes."""
        self._cache.publish(self._changed)
        self._cache.counts.apply(self._counts)


def _blame(noted: list[Noted]) -> None:
    """The one job whose writes the formats refuse, as a JobWriteError (the batch call names none)."""
    for change in noted:
        try:
            job_writes([change])
        except (ValueError, OverflowError, TypeError) as exc:
            raise JobWriteError(change[0].id, change[1] is None, str(exc)) from exc
