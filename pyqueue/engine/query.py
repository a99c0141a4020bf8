"""Listing and counting jobs by filter, from sorted index ranges: never a scan of every job.

Each indexed dimension (ids, queues, types, statuses) gives a stream of ids in order: the union
(heap merge) of its values' ranges. The streams of the dimensions given are intersected by a merge
join, and only the candidates that survive are read, in batches, to check the rest of the filter
(priority, run_at, attempts ranges, and every indexed field again: an index read and a record read
are not one snapshot). With a queue filter the status is part of the range, since the queue index
is keyed by (queue, status, id). Pages are cut by id, so a cursor is just the boundary id.
"""

import heapq
import logging
import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyqueue.engine.counts import Counts
from pyqueue.engine.errors import InvalidArgument
from pyqueue.engine.model import JobView
from pyqueue.engine.rebuild import ready_queues
from pyqueue.store import keys
from pyqueue.store.contract import DamagedReadError, Family, Store
from pyqueue.store.records import CorruptRecordError, JobRecord, Status

log = logging.getLogger("pyqueue.query")

MAX_LIMIT = 1000
DEFAULT_LIMIT = 50
MAX_IDS = 10_000
_HIGH = b"\xff" * (keys.ID_BYTES + 1)

Bounds = tuple[int | None, int | None]


@dataclass(frozen=True)
class JobFilter:
    ids: tuple[int, ...] = ()
    queues: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    statuses: tuple[Status, ...] = ()
    priority: Bounds = (None, None)
    run_at_ms: Bounds = (None, None)
    attempts: Bounds = (None, None)

    def __post_init__(self) -> None:
        if len(self.ids) > MAX_IDS:
            raise InvalidArgument(f"{len(self.ids)} ids in one filter; the limit is {MAX_IDS}")
        for name in ("priority", "run_at_ms", "attempts"):
            low, high = getattr(self, name)
            if low is not None and high is not None and low > high:
                raise InvalidArgument(
                    f"the {name} range's min {low} is above its max {high}: nothing could match"
                )

    @property
    def has_ranges(self) -> bool:
        return any(b != (None, None) for b in (self.priority, self.run_at_ms, self.attempts))

    def matches(self, r: JobRecord) -> bool:
        return (
            (not self.ids or r.id in self.ids)
            and (not self.queues or r.queue in self.queues)
            and (not self.types or r.type in self.types)
            and (not self.statuses or r.status in self.statuses)
            and _within(r.priority, self.priority)
            and _within(r.run_at_ms, self.run_at_ms)
            and _within(r.attempts, self.attempts)
        )


def _within(value: int, bounds: Bounds) -> bool:
    lo, hi = bounds
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _range_ids(
    store: Store, family: Family, prefix: bytes, after: int | None, descending: bool
) -> Iterator[int]:
    """Ids under `prefix` (keys are prefix + id), strictly beyond `after` in the scan order."""
    lo, hi = prefix, prefix + _HIGH
    if after is not None:
        if descending:
            hi = prefix + keys.pack_id(after)
        elif after + 1 < 2**64:
            lo = prefix + keys.pack_id(after + 1)
        else:
            return iter(())
    return (keys.id_suffix(k) for k, _ in store.scan(family, lo, hi, reverse=descending))


def _status_ids(store: Store, status: int, after: int | None, descending: bool) -> Iterator[int]:
    if status != Status.READY:
        return _range_ids(store, Family.INDEX, keys.status_prefix(status), after, descending)
    # Ready keys run in (queue, priority, id) order, not by id: merge each queue's range instead.
    return _union(
        [
            _range_ids(store, Family.INDEX, keys.queue_prefix(q, status), after, descending)
            for q in ready_queues(store)
        ],
        descending,
    )


def _union(streams: list[Iterator[int]], descending: bool) -> Iterator[int]:
    if len(streams) == 1:
        return streams[0]
    merged = heapq.merge(*streams, reverse=descending)
    return _dedupe(merged)


def _dedupe(ids: Iterable[int]) -> Iterator[int]:
    last = None
    for job_id in ids:
        if job_id != last:
            yield job_id
        last = job_id


def _intersect(streams: list[Iterator[int]], descending: bool) -> Iterator[int]:
    if len(streams) == 1:
        yield from streams[0]
        return
    ahead = operator.lt if descending else operator.gt  # ahead(a, b): a comes after b in scan order
    heads = []
    for stream in streams:
        head = next(stream, None)
        if head is None:
            return
        heads.append(head)
    while True:
        target = heads[0]
        for head in heads[1:]:
            if ahead(head, target):
                target = head
        agreed = True
        for i, stream in enumerate(streams):
            while ahead(target, heads[i]):  # behind the target: catch up
                nxt = next(stream, None)
                if nxt is None:
                    return
                heads[i] = nxt
            if heads[i] != target:
                agreed = False
        if agreed:
            yield target
            for i, stream in enumerate(streams):
                nxt = next(stream, None)
                if nxt is None:
                    return
                heads[i] = nxt


def candidates(store: Store, f: JobFilter, after: int | None, descending: bool) -> Iterator[int]:
    streams: list[Iterator[int]] = []
    if f.ids:
        ordered = sorted(set(f.ids), reverse=descending)
        if after is not None:
            ordered = [i for i in ordered if (i < after if descending else i > after)]
        streams.append(iter(ordered))
    if f.queues:
        statuses = f.statuses or tuple(Status)
        streams.append(
            _union(
                [
                    _range_ids(store, Family.INDEX, keys.queue_prefix(q, s), after, descending)
                    for q in set(f.queues)
                    for s in statuses
                ],
                descending,
            )
        )
    elif f.statuses:
        streams.append(
            _union([_status_ids(store, s, after, descending) for s in set(f.statuses)], descending)
        )
    if f.types:
        streams.append(
            _union(
                [
                    _range_ids(store, Family.INDEX, keys.type_prefix(t), after, descending)
                    for t in set(f.types)
                ],
                descending,
            )
        )
    if not streams:
        streams.append(_range_ids(store, Family.DATA, keys.JOB, after, descending))
    return _intersect(streams, descending)


@dataclass(frozen=True, slots=True)
class Damaged:
    id: int
    problem: str


def _matching(
    store: Store, f: JobFilter, after: int | None, descending: bool, damaged: bool = False
) -> Iterator[JobRecord | Damaged]:
    """The records the filter selects, in id order. A record that cannot be read is skipped, or,
    with `damaged` (a listing), given as a Damaged marker where the index put it: one bad record
    must not break the listing of everything else."""
    batch: list[int] = []
    for job_id in candidates(store, f, after, descending):
        batch.append(job_id)
        if len(batch) == 256:
            yield from _read(store, f, batch, damaged)
            batch = []
    yield from _read(store, f, batch, damaged)


def _read_each(store: Store, wanted: list[bytes]) -> list[bytes | DamagedReadError | None]:
    """The values of `wanted` (DATA); when a damaged block fails the read, each read alone (what
    cannot be read is its error), so one damaged block costs its own jobs, not the listing."""
    try:
        return list(store.get_many(Family.DATA, wanted))
    except DamagedReadError:
        out: list[bytes | DamagedReadError | None] = []
        for key in wanted:
            try:
                out.append(store.get(Family.DATA, key))
            except DamagedReadError as exc:
                out.append(exc)
        return out


def _read(store: Store, f: JobFilter, ids: list[int], damaged: bool) -> Iterator[JobRecord | Damaged]:
    for job_id, raw in zip(ids, _read_each(store, [keys.job_key(i) for i in ids]), strict=True):
        if isinstance(raw, DamagedReadError):
            log.error("job %d: its record is in a damaged block: %s", job_id, raw)
            if damaged:
                yield Damaged(job_id, f"its record is in a damaged block ({raw})")
            continue
        if raw is not None:
            try:
                record = JobRecord.decode(job_id, raw)
            except CorruptRecordError as exc:
                log.error("%s; `pyqueue check` reports every such record", exc)
                if damaged:
                    yield Damaged(job_id, str(exc))
                continue
            if f.matches(record):
                yield record


def _view(found: JobRecord | Damaged, payload: bytes | DamagedReadError | None) -> JobView:
    if isinstance(found, Damaged):
        return JobView.damaged(found.id, found.problem)
    if isinstance(payload, DamagedReadError):
        log.error("job %d: its payload is in a damaged block: %s", found.id, payload)
        return JobView.damaged(found.id, f"its payload is in a damaged block ({payload})")
    return JobView(found, payload or b"")


@dataclass
class Page:
    jobs: list[JobView]
    next_cursor: str
    prev_cursor: str


def list_jobs(store: Store, f: JobFilter, limit: int, descending: bool, cursor: str) -> Page:
    if not 0 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit {limit} is outside 1..{MAX_LIMIT}")
    limit = limit or DEFAULT_LIMIT
    backwards, after = _parse_cursor(cursor)
    order = descending != backwards  # a "before" cursor walks the other way, then flips the page
    found: list[JobRecord | Damaged] = []
    for record in _matching(store, f, after, order, damaged=True):
        found.append(record)
        if len(found) > limit:
            break
    more = len(found) > limit
    found = found[:limit]
    if backwards:
        found.reverse()
    payloads = _read_each(store, [keys.payload_key(r.id) for r in found])
    jobs = [_view(r, p) for r, p in zip(found, payloads, strict=True)]
    first, last = (found[0].id, found[-1].id) if found else (after, after)
    has_next = more if not backwards else after is not None
    has_prev = (after is not None) if not backwards else more
    return Page(
        jobs,
        next_cursor=f"a{last}" if has_next and last is not None else "",
        prev_cursor=f"b{first}" if has_prev and first is not None else "",
    )


def _parse_cursor(cursor: str) -> tuple[bool, int | None]:
    if not cursor:
        return False, None
    boundary = cursor[1:]
    digits = boundary.isascii() and boundary.isdigit()  # str.isdigit() alone takes "\u0661" too
    if cursor[0] not in "ab" or not digits or len(boundary) > 20 or int(boundary) >= 1 << 64:
        raise InvalidArgument(
            f"cursor {cursor[:40]!r} was not made by this server; pass one from a previous page"
        )
    return cursor[0] == "b", int(boundary)


def count_jobs(store: Store, counts: Counts, f: JobFilter) -> int:
    if not (f.ids or f.types or f.has_ranges):
        return counts.total(list(f.queues) or None, [int(s) for s in f.statuses] or None)
    if not f.has_ranges and not f.ids:
        return sum(1 for _ in candidates(store, f, None, False))
    return sum(1 for _ in _matching(store, f, None, False))


def matching_ids(store: Store, f: JobFilter) -> list[int]:
    """Every id the filter selects (for changes by filter)."""
    return [r.id for r in _matching(store, f, None, False)]  # a damaged record is left as it is
